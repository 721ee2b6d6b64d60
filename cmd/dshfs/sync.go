package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/dshfs/dshfs/eventstore/postgres"
	"github.com/dshfs/dshfs/fleetsync"
)

// cmdSync copies a host's store into a fleet store (package fleetsync): one line per session on stdout,
// a progress bar on a terminal, a summary on stderr; --watch then follows the store, one line per change
// copied, until SIGINT or SIGTERM.
func cmdSync(ctx context.Context, args []string, out *bufio.Writer, stderr io.Writer) (int, error) {
	o, pos, err := parseArgs(args, map[string]bool{"config": true, "watch": true, "release": true, "host": true})
	if err != nil {
		return exitUsageErr, err
	}
	if len(pos) != 2 {
		return exitUsageErr, &usageError{"sync needs SRC and DST"}
	}
	if postgres.IsDSN(pos[0]) {
		return exitUsageErr, &usageError{"sync's SRC is a host's store (a JSONL root or a SQLite database), not a fleet store"}
	}
	if !postgres.IsDSN(pos[1]) {
		return exitUsageErr, &usageError{"sync's DST is a fleet store: postgres://… or postgresql://…"}
	}
	cfg, err := loadConfig(o.config)
	if err != nil {
		return exitUsageErr, err
	}
	host := o.host
	if host == "" {
		host = cfg.Fleet.Host
	}
	if host == "" {
		if host, err = os.Hostname(); err != nil {
			return exitUsageErr, fmt.Errorf("sync: this host's name: %w (give --host NAME)", err)
		}
	}
	// SIGINT/SIGTERM end the run between transactions' commits: an interrupted transaction rolls back,
	// and the summary still says what was copied.
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	src, err := openExisting(pos[0], readOnly(cfg)) // never written: a SQLite source is opened read-only
	if err != nil {
		return exitUsageErr, err
	}
	defer closeBackend(src.Backend())
	dst, err := postgres.Open(ctx, pos[1], postgres.Options{Host: host, MaxData: cfg.Writer.MaxLineBytes,
		MaxSession: cfg.Writer.MaxSessionBytes, ReleaseAfter: cfg.Fleet.ReleaseAfter, Timeout: cfg.Fleet.Timeout})
	if err != nil {
		return exitUsageErr, err
	}
	defer dst.Close()

	start := time.Now()
	var bar *progress
	sum := syncSummary{}
	s := fleetsync.New(src, dst, fleetsync.Options{Host: host, Progress: func(done, total int, events, bytes int64) {
		if bar == nil {
			bar = newProgress(os.Stderr, "syncing", total)
		}
		rate := float64(events) / max(time.Since(start).Seconds(), 1e-3)
		bar.stepWith(done, fmt.Sprintf("sessions, %d events, %s, %.0f events/s", events, byteSize(bytes), rate))
	}})
	reports, err := s.Pass(ctx, false)
	if bar != nil {
		bar.done()
	}
	for _, r := range reports {
		sum.add(r)
		writeReport(out, r, false)
	}
	out.Flush()
	if ctx.Err() != nil {
		// a signal before the pass finished: what committed stays, the rest is copied by the next run
		sum.print(stderr, host, start)
		return exitUsageErr, errors.New("sync interrupted before every session was synced; run it again to finish")
	}
	if err != nil {
		sum.print(stderr, host, start)
		return exitUsageErr, err
	}
	if o.release != "" {
		if err := s.Release(ctx, o.release); err != nil {
			sum.print(stderr, host, start)
			return exitFound, fmt.Errorf("sync --release %s: %w", o.release, err)
		}
		fmt.Fprintf(out, "released\t%s\n", textField(o.release))
		out.Flush()
	}
	if o.watch {
		fmt.Fprintf(stderr, "dshfs: sync: following %s into %s as host %s (SIGINT or SIGTERM stops)\n", pos[0], dst.Location(), host)
		err := s.Watch(ctx, func(r fleetsync.Report) {
			sum.add(r)
			writeReport(out, r, true)
			out.Flush()
		}, func(msg string) { fmt.Fprintf(stderr, "dshfs: sync: %s\n", msg) })
		if err != nil {
			sum.print(stderr, host, start)
			return exitUsageErr, err
		}
	}
	sum.print(stderr, host, start)
	return sum.code(), nil
}

// writeReport prints one session's line: status, id, events, bytes, the seqs it holds now, and a reason;
// in --watch mode led by the time.
func writeReport(out *bufio.Writer, r fleetsync.Report, stamped bool) {
	if stamped {
		out.WriteString(time.Now().UTC().Format("2006-01-02T15:04:05.000Z"))
		out.WriteByte('\t')
	}
	line := string(r.Status) + "\t" + textField(r.ID) + "\t" + strconv.FormatInt(r.Events, 10) + "\t" +
		strconv.FormatInt(r.Bytes, 10) + "\t" + strconv.FormatInt(r.To, 10)
	if r.Reason != "" {
		line += "\t" + textField(r.Reason)
	}
	out.WriteString(line)
	out.WriteByte('\n')
}

// syncSummary counts a run's reports.
type syncSummary struct {
	sessions      map[string]bool
	counts        map[fleetsync.Status]int
	events, bytes int64
}

func (s *syncSummary) add(r fleetsync.Report) {
	if s.counts == nil {
		s.counts, s.sessions = map[fleetsync.Status]int{}, map[string]bool{}
	}
	s.counts[r.Status]++
	s.sessions[r.ID] = true
	s.events += r.Events
	s.bytes += r.Bytes
}

// code is the exit code: 2 when something failed, 1 when something was refused or skipped.
func (s *syncSummary) code() int {
	switch {
	case s.counts[fleetsync.Failed] > 0:
		return exitUsageErr
	case s.counts[fleetsync.Refused] > 0 || s.counts[fleetsync.Skipped] > 0:
		return exitFound
	}
	return exitOK
}

func (s *syncSummary) print(w io.Writer, host string, start time.Time) {
	c := s.counts
	took := time.Since(start)
	fmt.Fprintf(w, "dshfs: sync as host %s: %d sessions (%d copied, %d unchanged, %d identical, %d released, %d refused, %d skipped, %d failed), %d events, %s in %s (%.0f events/s)\n",
		host, len(s.sessions), c[fleetsync.Copied], c[fleetsync.Unchanged], c[fleetsync.Identical], c[fleetsync.Released],
		c[fleetsync.Refused], c[fleetsync.Skipped], c[fleetsync.Failed], s.events, byteSize(s.bytes),
		took.Round(time.Millisecond), float64(s.events)/max(took.Seconds(), 1e-3))
}

// byteSize prints a byte count for people: 812 B, 3.4 MiB.
func byteSize(n int64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
