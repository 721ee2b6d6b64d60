package fs

import (
	"context"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dshfs/dshfs/internal/storewatch"
)

// Change watching. The kernel caches a file's attributes for the attribute timeout, so a reader polling
// `stat` or `tail -f` sees an append made by another process only when the mount tells the kernel. Polling
// the store every refresh_interval bounds that lag by the interval (and costs a listing of every session
// each time); inotify (internal/storewatch) tells the mount at once:
//
//   - a session's transcript written invalidates that session at once — no listing needed, since every
//     access re-checks the artifact's revision anyway;
//   - anything structural starts a listing pass at once (bursts coalesced), which finds what changed and
//     invalidates it.
//
// Polling stays as a safety net at a slower pace (inotifyPoll). Where inotify is unavailable or runs out
// of watches the mount says so in its log and polls every refresh_interval as before.

// inotifyPoll is the safety-net listing interval while inotify watches the whole store: events a
// filesystem does not report (a network filesystem, a change made before the watch was added) are still
// found.
const inotifyPoll = time.Minute

// remoteFS names the network filesystem dir is on ("" for a local one, or when it cannot tell): inotify
// reports only the changes made through this host's kernel, so what another host writes there is found
// by polling alone.
func remoteFS(dir string) string {
	var st unix.Statfs_t
	if unix.Statfs(dir, &st) != nil {
		return ""
	}
	return networkFS[int64(st.Type)]
}

// networkFS are the statfs magic numbers of filesystems another host can write to.
var networkFS = map[int64]string{
	0x6969: "nfs", 0x517b: "smb", 0xff534d42: "cifs", 0xfe534d42: "smb2", 0x01021997: "9p",
	0x00c36400: "ceph", 0x5346414f: "afs", 0x73757245: "coda", 0x01161970: "gfs2", 0x7461636f: "ocfs2",
	0x0bd00bd0: "lustre", 0x65735546: "fuse", 0x564c: "ncp",
}

// watchInotify runs inotify beside the polling loop: it returns a channel that asks the loop for a listing
// pass now, and whether inotify covers the store (then the loop polls at the slower safety-net pace).
func (f *FS) watchInotify(ctx context.Context) (passNow <-chan struct{}, w *storewatch.Watcher) {
	if os.Getenv("DSHFS_NO_INOTIFY") != "" { // tests of the polling path
		f.log.Info("inotify disabled by DSHFS_NO_INOTIFY: polling every refresh_interval")
		f.watchMode.Store(watchRefresh)
		return nil, nil
	}
	w, err := storewatch.New(func(dir string, err error) {
		f.log.Info("inotify cannot watch every directory; changes there are found by polling every refresh_interval", "dir", dir, "err", err)
	})
	if err != nil {
		f.log.Info("inotify unavailable: polling every refresh_interval", "err", err)
		f.watchMode.Store(watchRefresh)
		return nil, nil
	}
	f.watchMode.Store(watchInotify)
	if fw, ok := f.opts.Store.Backend().(interface{ WatchFiles() []string }); ok {
		w.Files(fw.WatchFiles())
	}
	pass := make(chan struct{}, 1)
	switch remote := remoteFS(f.opts.Root); {
	case w.OfFiles():
	case remote != "":
		// another host's writes to a network filesystem raise no inotify event here: every access keeps
		// stat'ing the artifact, and names keep the configured timeouts
		f.log.Info("the store is on a network filesystem: inotify sees only this host's changes; the polling safety net finds the others", "fs", remote)
	default:
		f.watcher.Store(w) // its watches vouch for artifact stats and stable names (stats.go)
	}
	go func() {
		<-ctx.Done()
		f.watcher.Store(nil)
		w.Close()
	}()
	go w.Run(func(id string) {
		f.queue(changes{changed: []string{id}}) // drops the session's stat first
	}, func() {
		f.stats.dropAll() // a listing pass finds what changed; until then no stat is trusted
		select {
		case pass <- struct{}{}:
		default: // a pass is already asked for: bursts coalesce
		}
	})
	return pass, w
}
