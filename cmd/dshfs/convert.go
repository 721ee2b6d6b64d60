package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/dshfs/dshfs/convert"
	"github.com/dshfs/dshfs/eventstore"
)

// cmdConvert copies every session of SRC into DST (package convert): one line per session on stdout, a
// progress bar on a terminal.
func cmdConvert(ctx context.Context, args []string, out *bufio.Writer, stderr io.Writer) (int, error) {
	o, pos, err := parseArgs(args, map[string]bool{"config": true, "verify": true, "session": true})
	if err != nil {
		return exitUsageErr, err
	}
	if len(pos) != 2 {
		return exitUsageErr, &usageError{"convert needs SRC and DST"}
	}
	// SRC may name the sessions to hand over itself (postgres://…/db?session=ID); --session adds more.
	srcSpec, ids, err := sessionParam(pos[0])
	if err != nil {
		return exitUsageErr, err
	}
	pos[0] = srcSpec
	ids = append(ids, o.sessions...)
	for _, id := range ids {
		if id == "" {
			return exitUsageErr, &usageError{"--session needs a session id"}
		}
	}
	if sameFleet(pos[0], pos[1]) {
		return exitUsageErr, fmt.Errorf("convert: SRC and DST are the same store (%s)", specName(pos[0]))
	}
	cfg, err := loadConfig(o.config)
	if err != nil {
		return exitUsageErr, err
	}
	srcCfg := readOnly(cfg) // the source is only read
	src, err := openExisting(pos[0], srcCfg)
	if err != nil {
		return exitUsageErr, err
	}
	defer closeBackend(src.Backend())
	cfg.ReadOnly = false
	dst, err := openStore(pos[1], cfg)
	if err != nil {
		return exitUsageErr, err
	}
	defer closeBackend(dst.Backend())
	if same(storeRoot(src), storeRoot(dst)) {
		return exitUsageErr, fmt.Errorf("convert: SRC and DST are the same store (%s)", storeRoot(src))
	}
	var bar *progress
	start := time.Now()
	opts := convert.Options{
		Verify:   o.verify,
		Sessions: ids,
		Reopen: func() (eventstore.Backend, error) {
			st, err := openStore(pos[1], srcCfg) // read-only
			if err != nil {
				return nil, err
			}
			return st.Backend(), nil
		},
		Progress: func(done, total, events int) {
			if bar == nil {
				bar = newProgress(os.Stderr, "converting", total)
			}
			rate := float64(events) / max(time.Since(start).Seconds(), 1e-3)
			eta := time.Duration(float64(time.Since(start)) / float64(done) * float64(total-done)).Round(time.Second)
			bar.stepWith(done, fmt.Sprintf("sessions, %d events, %.0f events/s, ETA %s", events, rate, eta))
		},
	}
	reports, err := convert.Run(ctx, src, dst.Backend(), opts)
	if bar != nil {
		bar.done()
	}
	code := exitOK
	counts := map[convert.Outcome]int{}
	events := 0
	for _, r := range reports {
		counts[r.Outcome]++
		events += r.Events
		line := string(r.Outcome) + "\t" + r.ID + "\t" + strconv.Itoa(r.Events)
		if r.Reason != "" {
			line += "\t" + r.Reason
		}
		fmt.Fprintln(out, line)
		switch r.Outcome {
		case convert.Skipped, convert.Differs:
			code = max(code, exitFound)
		case convert.Failed, convert.Missing:
			code = exitUsageErr
		}
	}
	out.Flush()
	missing := ""
	if n := counts[convert.Missing]; n > 0 {
		missing = fmt.Sprintf(", %d not in SRC", n)
	}
	fmt.Fprintf(stderr, "dshfs: %d sessions (%d converted, %d completed, %d already identical, %d skipped, %d differ, %d failed%s), %d events in %s\n",
		len(reports), counts[convert.Converted], counts[convert.Completed], counts[convert.Identical], counts[convert.Skipped],
		counts[convert.Differs], counts[convert.Failed], missing, events, time.Since(start).Round(time.Millisecond))
	if err != nil {
		return exitUsageErr, err
	}
	return code, nil
}

// same reports whether two store paths name one file or directory.
func same(a, b string) bool {
	fa, err1 := os.Stat(a)
	fb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(fa, fb)
}

// closeBackend closes a backend that holds resources (a SQLite connection pool).
func closeBackend(b eventstore.Backend) {
	if c, ok := b.(interface{ Close() error }); ok {
		c.Close()
	}
}
