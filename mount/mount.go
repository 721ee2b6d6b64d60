package mount

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/nodes"
)

// Readme is the root README of every mount.
const Readme = `dshfs — a DeepSeek Harness session store as files

sessions/<id>/           one directory per session (<id> encoded like the harness's directory names)
  header.json            the session header (the harness's inspect().meta)
  status.json            state, revision, balance, open turn, repair preview, unknown tool outcomes, refusal
  raw.jsonl              the artifact's text (zstd: complete frames decoded; JSONL stores only)
  events.jsonl           the stored log, one event per line (no synthetic repair events)
  events/<seq>.<type>.json, turns/<n>.jsonl
  surface.jsonl, surface/   the model-visible surface;  messages.jsonl  the derived model history
  shadowed.jsonl, shadowed/ events hidden by compaction or pruning (never deleted)
  trace/<seq>.json       how an event was replaced and what cites it
  compactions/           one file per compaction transaction, prunes.jsonl
  forks/, parent         children (links) and the parent id (a file);  spill/  spilled tool output
  transcript.md, transcript.html   the session for a person, every piece of evidence marked [!]
  usage.jsonl, usage.svg           tokens per step; the context over the log, compactions marked
by-project/<project>/<id> -> ../../sessions/<id>   (JSONL stores only)
by-host/<host>/<id> -> ../../sessions/<id>         (a fleet store: the host each session came from)
store/                   the store's artifacts in the harness's layout, each frozen at its last flush
                         (a SQLite store: sessions.db, one consistent copy of the database):
                         "rsync -a MNT/store/ DEST/" copies a store the harness opens (see dshfs backup)
status.json              store status: sessions, refusals, root errors, quiesce
stats.json               the mount's cache counters (decodes, index hits, readahead, evictions, primings, live logs)

Files report exact sizes and data-derived mtimes, so "rsync -a MNT/sessions/ DEST/" copies exact bytes;
"tail -f sessions/<id>/events.jsonl" follows appends made by the harness or through this mount. A refused
session shows only header.json, status.json (with the harness's reason) and raw.jsonl. Unmount with
SIGINT/SIGTERM to dshfs (which flushes first), or "fusermount3 -u MNT".
`

// ReadmeReadOnly closes the README of a read-only mount.
const ReadmeReadOnly = `
This mount is read-only: every write fails with EROFS.
`

// ReadmeWritable closes the README of a writable mount: the commands.
const ReadmeWritable = `
Writing (this mount is writable):
  sessions/<id>/append   one event per line: {"type":…,"data":…} (+ seq, time, surfaceOp, sourceEventSeqs,
                         ignorable); each write is applied whole or not at all (EINVAL, reason in status.json)
  sessions/<id>/ctl      echo flush|resume|close > ctl;  echo "fork [BOUNDARY] [CHILD_ID]" > ctl
                         echo compact > ctl (or "compact START END"): a summary replaces the older surface,
                         every event stays in events.jsonl; echo prune > ctl: cut oversized tool results
                         (needs a turn this mount holds open)
  ctl                    echo flush|rescan > ctl;  echo "create [ID] [cwd=/abs/path]" > ctl
                         echo "quiesce [SECONDS]" > ctl: flush all, hold writes (a still store/ for a copy)
                         until echo resume-writes > ctl, the deadline (default 60 s) or unmount
  mkdir sessions/<name>  creates a session (<name> encoded as listed: a~002Fb is id "a/b")
Accepted events are visible at once and written in batches; "flush" (or fsync on append) returns once
they are durable. Every refusal's errno has its reason in status.json (lastError) and the mount's log.
A copy of sessions/ leaves the control files out: rsync -a --exclude='/*/ctl' --exclude='/*/append'
`

// Mount mounts the tree at mountpoint: directly as root (no fusermount needed), through fusermount3
// otherwise. A read-only mount is read-only at the kernel level, so every write fails with EROFS. ctx
// bounds the notifier that tells the kernel about changes made through the mount.
func (f *FS) Mount(ctx context.Context, mountpoint string) (*fuse.Server, error) {
	entry, attr := f.Timeouts()
	neg := time.Duration(0)
	readme := Readme
	// default_permissions: the kernel checks every access against the owner and mode each node reports,
	// which for a session's files are its artifact's (with allow_other, nobody reads through the mount what
	// they could not read in the store)
	options := []string{"default_permissions"}
	if f.opts.Config.ReadOnly {
		options = append(options, "ro")
		readme += ReadmeReadOnly
	} else {
		readme += ReadmeWritable
	}
	root := nodes.NewRoot(f, []byte(readme), &f.primed)
	opts := &gofs.Options{
		EntryTimeout:    &entry,
		AttrTimeout:     &attr,
		NegativeTimeout: &neg,
		// a mode-000 artifact's files report mode 000, not go-fuse's default 0644
		NullPermissions: true,
		UID:             uint32(os.Getuid()),
		GID:             uint32(os.Getgid()),
		MountOptions: fuse.MountOptions{
			FsName:       "dshfs",
			Name:         "dshfs",
			AllowOther:   f.opts.Config.FUSE.AllowOther,
			DirectMount:  os.Geteuid() == 0,
			Options:      options,
			MaxReadAhead: 1 << 20,
			// One append request carries up to 1 MiB: the kernel splits a larger write(2), and each request
			// is applied all-or-nothing.
			MaxWrite: 1 << 20,
		},
	}
	f.mountpoint = canonicalMountpoint(mountpoint)
	raw := gofs.NewNodeFS(root, opts)
	if f.opts.Config.ReadOnly {
		raw = &noFlush{RawFileSystem: raw, log: f.log}
	}
	server, err := fuse.NewServer(raw, mountpoint, &opts.MountOptions)
	if err != nil {
		return nil, err
	}
	// NewServer has mounted and answered the kernel's INIT: the mount serves once Serve runs. No WaitMount:
	// go-fuse's WaitMount opens MNT/.go-fuse-epoll-hack from this process (to have the kernel's first POLL
	// answered); a process killed while it waits on its own mount cannot exit, and the mountpoint hangs
	// every process that touches it. That hack guards against the daemon polling files of its own mount,
	// which dshfs never opens; a POLL from a reader is answered ENOSYS like any other.
	go server.Serve()
	closeFuseOnExec()
	f.root = root.EmbeddedInode()
	go f.notifier(ctx)
	for range f.readaheadWorkers() {
		go f.readaheadLoop(ctx)
	}
	return server, nil
}

// noFlush is the file system of a read-only mount: it answers FLUSH with ENOSYS. The kernel sends a FLUSH
// request at every close(2) and waits for its answer; on ENOSYS it stops sending them for the whole
// connection (fuse_flush sets no_flush, and the close itself succeeds). Nothing of a read-only mount needs
// a close to reach it — only append's FLUSH reports a partial line and makes events durable, and a
// read-only mount has no append file — so each close of a read-only mount costs one asynchronous RELEASE
// instead of a synchronous round trip more: a repeated grep -l over 10k files makes 10k fewer.
type noFlush struct {
	fuse.RawFileSystem
	log *slog.Logger
}

func (n *noFlush) Flush(cancel <-chan struct{}, in *fuse.FlushIn) fuse.Status {
	// logged each time: the kernel sends one per connection, so more than one line says it did not listen
	n.log.Info("read-only mount: FLUSH answered ENOSYS, so the kernel sends no more of them (a close costs one request)")
	return fuse.ENOSYS
}

// canonicalMountpoint is mountpoint as /proc/PID/cwd shows paths below it: absolute, its parent's
// symbolic links resolved (resolved before the mount, and never the mountpoint itself: the serving
// process must not look at its own mount).
func canonicalMountpoint(mountpoint string) string {
	abs, err := filepath.Abs(mountpoint)
	if err != nil {
		return ""
	}
	parent, base := filepath.Split(abs)
	if p, err := filepath.EvalSymlinks(parent); err == nil {
		parent = p
	}
	return filepath.Join(parent, base)
}

// closeFuseOnExec marks this process's /dev/fuse descriptors close-on-exec. go-fuse's direct mount (as
// root) opens the device without O_CLOEXEC, so every program dshfs starts (a summarizer) would inherit the
// mount's connection: if dshfs then died, the kernel would keep the connection up for as long as that
// program ran, and every request on the mount would hang instead of failing with ENOTCONN.
func closeFuseOnExec() {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range entries {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && target == "/dev/fuse" {
			syscall.CloseOnExec(fd)
		}
	}
}

// Watch polls the store every refresh interval until ctx ends, and for every change invalidates the
// kernel's caches of what it covers. Notifications run here, outside FUSE callbacks and without holding
// any lock, as go-fuse requires; one pass per interval coalesces bursts of appends.
func (f *FS) Watch(ctx context.Context) { f.StartWatch(ctx)() }

// StartWatch sets up change watching — the change feed of a store that announces its changes (feed.go),
// every directory of it watched when it returns — and returns the loop of Watch, to run once the mount is
// up. Call it before Mount: a change made after the mount came up but before a directory was watched would
// raise no event, and with a long refresh_interval the kernel would keep the stale attributes it had cached
// (a CI run saw an external append missed that way, the watches installed by a goroutine the mount did not
// wait for).
func (f *FS) StartWatch(ctx context.Context) (loop func()) {
	interval := f.opts.Config.FUSE.RefreshInterval
	if interval <= 0 {
		interval = time.Second
	}
	var passNow <-chan struct{}
	if w, ok := f.opts.Store.Backend().(eventstore.Watcher); ok {
		passNow, _ = f.watchFeed(ctx, w)
	} else {
		f.log.Info("the store announces no changes: polling every refresh_interval")
		f.watchMode.Store(watchRefresh)
	}
	return func() { f.watchLoop(ctx, interval, passNow) }
}

// watchLoop is Watch's loop: a listing pass every interval (or at once when the change feed asks), its
// changes told to the kernel. While the feed hears of every change (covered), the listing is a safety net
// at a slower pace. The backend's listing itself keeps its feed's watches in step with the sessions it
// finds, before the kernel is told: a new session's directory is watched before anyone reads it.
func (f *FS) watchLoop(ctx context.Context, interval time.Duration, passNow <-chan struct{}) {
	poll := func() time.Duration {
		if f.covered() {
			return max(interval, feedPoll) // changes are reported; the poll is a safety net
		}
		return interval
	}
	// sessions removed while no mount watched the store leave the index here, off the mount's start
	if l := f.Listing(); len(l.RootErrors) == 0 {
		ids := make([]string, len(l.Entries))
		for i, e := range l.Entries {
			ids[i] = e.ID
		}
		f.cache.PurgeAbsent(ids)
	}
	wait := poll()
	// a failed pass is tried again soon, not after the safety net's minute: it may have been asked for (a
	// change feed back after a reconnect, whose missed changes only a listing finds); the retries back off
	// to the usual pace while the store stays unreachable
	retry := interval
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		case <-passNow:
		}
		start := time.Now()
		c, err := f.refresh(ctx)
		if err != nil {
			f.log.Warn("store listing failed", "err", err)
			wait, retry = min(retry, poll()), min(2*retry, poll())
			continue
		}
		retry = interval
		f.noteGap()
		f.apply(c, f.root)
		// Polling (no inotify, or not everywhere), a change must show within refresh_interval, however long
		// the last pass took. Under inotify the slow safety-net poll may be spaced to ten times a pass's cost
		// (under a tenth of a core for a large store): inotify asks for a pass at once whatever the spacing,
		// and files being read are re-checked at every access regardless.
		wait = poll()
		if f.covered() {
			wait = max(wait, 10*time.Since(start))
		}
	}
}

// apply drops changed snapshots and tells the kernel which files and names are stale.
func (f *FS) apply(c changes, root *gofs.Inode) {
	for _, id := range c.changed {
		f.stats.drop(id)
	}
	f.cache.Purge(c.gone)
	if root == nil {
		return
	}
	sessions := root.GetChild("sessions")
	grown := map[string]bool{}
	for _, id := range c.changed {
		if f.opts.Store.Live(id) != nil && !slices.Contains(c.replaced, id) {
			// a session this process writes: its views come from the engine, whose list only grows, and
			// are keyed by its revision, so nothing kept is dropped (the growing renderings are extended,
			// viewcache/grow.go) and the kernel is told only about what an append can change
			grown[id] = true
			continue
		}
		f.cache.Drop(id)
	}
	if sessions == nil {
		return
	}
	for _, name := range append(append([]string(nil), c.added...), c.removed...) {
		sessions.NotifyEntry(name)
	}
	l := f.Listing()
	for _, id := range c.changed {
		i, ok := l.ByID[id]
		if !ok {
			continue
		}
		dir := sessions.GetChild(l.Names[i])
		if dir == nil {
			continue // the kernel never looked it up: nothing cached
		}
		if grown[id] {
			nodes.NotifyGrown(dir)
			continue
		}
		invalidateTree(dir, slices.Contains(c.replaced, id))
	}
	f.evict(sessions, l, c.evicted)
}

// invalidateTree drops the kernel's cached data and attributes of every known node below n. When the
// session's artifact was replaced, its files have new inode numbers: their names are dropped too, so the
// next lookup finds the new inodes while open descriptors keep the old ones (and their snapshots).
func invalidateTree(n *gofs.Inode, replaced bool) {
	for name, kid := range n.Children() {
		if kid.IsDir() {
			invalidateTree(kid, replaced)
			continue
		}
		kid.NotifyContent(0, 0)
		if replaced {
			n.NotifyEntry(name)
		}
	}
	n.NotifyContent(0, 0)
}

// Serve runs a mounted server until the first SIGINT/SIGTERM, then unmounts: while the mount is busy it
// keeps serving and retries every second; a second signal detaches it lazily. It returns nil once nothing
// is left mounted.
//
// beforeUnmount runs once, after the first signal and before the first unmount attempt (the live writer
// flushes there, so nothing accepted waits on a mount that is going away).
//
// sigs delivers SIGINT and SIGTERM (Signals); the caller subscribes before mounting, so that a signal that
// arrives while the mount is being set up is handled here instead of killing the process and leaving the
// mount behind.
func Serve(server *fuse.Server, mountpoint string, sigs <-chan os.Signal, log func(string, ...any), beforeUnmount func()) error {
	done := make(chan struct{})
	go func() { server.Wait(); close(done) }()
	select {
	case <-done:
		return nil // unmounted from outside (fusermount -u)
	case s := <-sigs:
		log("signal %v: unmounting %s", s, mountpoint)
	}
	if beforeUnmount != nil {
		beforeUnmount()
	}
	var report backoff
	started := time.Now()
	for {
		err := server.Unmount()
		if err == nil {
			<-done
			return nil
		}
		// busy: said once, then at growing intervals (backoff), each time naming who holds the mount
		if report.due(time.Now()) {
			held := "no process found holding it"
			if h := holders(canonicalMountpoint(mountpoint), 8, 2*time.Second); len(h) > 0 {
				held = "held by " + strings.Join(h, ", ")
			}
			since := ""
			if d := time.Since(started).Round(time.Second); d > 0 {
				since = fmt.Sprintf(" for %v", d)
			}
			log("%s is busy%s (%s; %s): still serving, retrying every second; send another signal to detach it", mountpoint, since, held, unmountError(err))
		}
		select {
		case <-done:
			return nil
		case <-time.After(time.Second):
		case s := <-sigs:
			log("signal %v: detaching %s", s, mountpoint)
			if err := detach(mountpoint); err != nil {
				return fmt.Errorf("lazy unmount of %s: %w", mountpoint, err)
			}
			select {
			case <-done:
			case <-time.After(5 * time.Second):
			}
			return nil
		}
	}
}

// unmountError is a failed unmount's reason, short: fusermount3 prints its own name and the mountpoint
// around the kernel's error, which the log line names already.
func unmountError(err error) string {
	text := oneLine(err)
	if i := strings.LastIndex(text, ": "); i >= 0 && strings.Contains(text, "fusermount") {
		text = strings.TrimSpace(text[i+2:])
	}
	if i := strings.LastIndex(text, " (code "); i > 0 {
		text = text[:i] // go-fuse's wrapping of fusermount's exit status
	}
	return strings.TrimSuffix(text, ";")
}

// oneLine is an error's text on one line (fusermount's output ends in newlines, which a log line would
// otherwise print as literal "\n").
func oneLine(err error) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), "\n", "; ")), " ")
}

// Signals subscribes to the signals that end a mount; stop ends the subscription.
func Signals() (sigs <-chan os.Signal, stop func()) {
	c := make(chan os.Signal, 2)
	signal.Notify(c, syscall.SIGINT, syscall.SIGTERM)
	return c, func() { signal.Stop(c) }
}

// detach is a lazy unmount: directly as root, through fusermount3 -z otherwise.
func detach(mountpoint string) error {
	if os.Geteuid() == 0 {
		return syscall.Unmount(mountpoint, syscall.MNT_DETACH)
	}
	for _, prog := range []string{"fusermount3", "fusermount"} {
		if path, err := exec.LookPath(prog); err == nil {
			out, err := exec.Command(path, "-u", "-z", mountpoint).CombinedOutput()
			if err != nil {
				return fmt.Errorf("%s: %v: %s", prog, err, out)
			}
			return nil
		}
	}
	return errors.New("no fusermount3 to detach with")
}
