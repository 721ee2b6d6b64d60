// Package nodes holds the go-fuse node types of the mounted tree (docs/tree.md): the root, the session
// directories, view files, per-event directories and symlinks, and on a writable mount the control files
// (ctl, append) and mkdir in sessions/. Nodes contain no format or projection logic: every byte they serve
// comes from a Source (the fs layer's caches over the views package), so a mounted file and `dshfs cat
// --view` of the same view are the same bytes; every write goes to the Source's Writer, and its refusals
// come back as errnos (errno in write.go is the one mapping).
package nodes

import (
	"context"
	"os"
	"syscall"
	"time"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/spill"
	"github.com/dshfs/dshfs/viewcache"
	"github.com/dshfs/dshfs/views"
)

// Source is what the tree reads from. The fs layer implements it with its session cache and watcher.
type Source interface {
	// Listing is the latest store listing (headers only), with names and project directories resolved.
	Listing() *Listing
	// Session returns the current snapshot of a session, loading it if needed.
	Session(ctx context.Context, id string) (*views.Session, error)
	// Refusal is why the current revision of a session is refused (nil when it is readable); it is
	// remembered per revision, so a lookup below a session whose snapshot was evicted decodes nothing.
	Refusal(ctx context.Context, id string) (error, error)
	// Render returns one view of the current snapshot, cached by revision, and its modification time.
	Render(ctx context.Context, id string, view views.View) (Rendered, error)
	// Attr returns a view's size and time, without rendering it when they are known: a rendering cached at
	// the current revision comes back whole, one known from the persistent index without Data but with its
	// Sum.
	Attr(ctx context.Context, id string, view views.View) (r Rendered, size int64, err error)
	// Kept returns a view's bytes at the current revision when the caches or the persistent index keep
	// them, and never renders: false when they would have to be rendered.
	Kept(ctx context.Context, id string, view views.View) (Rendered, bool)
	// StoreStatus renders the store's status.json. It, the index and stats.json say nothing of the
	// sessions the caller of ctx may not read (PermitSession), as the listings do not list them.
	StoreStatus(ctx context.Context) []byte
	// StoreIndex renders page p (from 1) of the store's index (views.IndexPage); ok is false for a page
	// past the last.
	StoreIndex(ctx context.Context, p int) (page []byte, ok bool)
	// VisibleSessions is how many sessions the caller of ctx may read: the index has a page per
	// views.IndexPageSize of them.
	VisibleSessions(ctx context.Context) int
	// StoreStats renders the root stats.json: the mount's cache counters, which move with every read (and
	// so are kept out of status.json, which a copy of the mount must find unchanged).
	StoreStats(ctx context.Context) []byte
	// Spill is the spill-root policy.
	Spill() *spill.Roots
	// Timeouts are the kernel cache timeouts for entries and attributes.
	Timeouts() (entry, attr time.Duration)
	// StableTimeouts are the entry timeout of a stable child (child.stable) and the attribute timeout of
	// one that is not volatile: longer than Timeouts while the mount hears of every change to the store as
	// it happens (and tells the kernel), Timeouts otherwise.
	StableTimeouts() (entry, attr time.Duration)
	// Logf records a refusal or failure a user saw as an errno, so that its reason is in the log.
	Logf(format string, args ...any)
	// Writer is the write side; nil on a read-only mount (ctl and append are absent then).
	Writer() Writer
	// Owner is the owner and permission bits of a session's artifact (nil when unknown): the session's
	// files are served with them, and the kernel enforces them (default_permissions).
	Owner(id string) *eventstore.Owner
	// PermitSession is EACCES when the caller of the request ctx serves could not read session id's
	// artifact in the store (search on every directory above it, read on it); 0 when it could, or when
	// the mount serves only its owner. The kernel checks the modes nodes report; this check is exact.
	PermitSession(ctx context.Context, id string) syscall.Errno
	// Permit is PermitSession for a path of the store or a spill file: want (R_OK, X_OK bits) on path,
	// whose own owner and mode are self (read from path when nil), search on every directory above it.
	Permit(ctx context.Context, path string, self *eventstore.Owner, want uint32) syscall.Errno
	// PathOwner is the owner and mode to report for path (a store directory or artifact, a spill file):
	// self, or path's own when nil, narrowed to what the directories above allow; nil when unknown.
	PathOwner(path string, self *eventstore.Owner) *eventstore.Owner
	// StorePath is the path in the store of the store/ entry at root-relative rel.
	StorePath(rel string) string
	// Identity is the storage identity of the session's artifact now (Artifact.Identity), "" when
	// unknown: a session's files are numbered by it, so a replaced artifact's files are new inodes.
	Identity(ctx context.Context, id string) string
	// Frozen is the frozen prefix of a listed artifact (store/): its durable bytes, exact size and
	// data-derived time; a refused session's artifact whole, as it is.
	Frozen(ctx context.Context, e eventstore.Entry) (eventstore.Frozen, error)
	// OpenArtifact opens a listed artifact for store/, with the backend's safety rules, and says which
	// artifact it opened.
	OpenArtifact(ctx context.Context, path string) (*os.File, eventstore.Artifact, error)
}

// Rendered is one view's bytes and the time of the last change it covers (viewcache.Rendered: the cache
// below the tree produces it).
type Rendered = viewcache.Rendered

// Blob is bytes served from a file that does not change while it is held (viewcache.Blob).
type Blob = viewcache.Blob

// Listing is a store listing prepared for the tree: sessions by their directory name.
type Listing struct {
	Entries    []eventstore.Entry // sorted by Name
	Names      []string           // Names[i] is the directory name of Entries[i]
	ByName     map[string]int     // directory name → index
	ByID       map[string]int     // session id → index
	Projects   map[string][]int   // project directory → indexes (JSONL stores)
	Hosts      map[string][]int   // source host → indexes (a fleet store); empty where the backend has none
	Children   map[string][]int   // parent session id → indexes of the sessions forked from it
	RootErrors []eventstore.RootError
	ModTime    time.Time // the newest artifact change, for the directories above sessions
	// Files reports a backend that keeps a transcript file per session (JSONL): only then do sessions show
	// raw.jsonl and the root by-project/ (a SQLite store has neither, as the harness's locate() has none).
	Files bool
	// Mirror is store/: every artifact file of the store (strays and refused sessions included), by its
	// path relative to the root; nil when the backend keeps no artifact files.
	Mirror *Mirror
}

// Mirror indexes the artifact files of a store by their root-relative paths (project/session/file).
type Mirror struct {
	Dirs  map[string][]string         // "" and each directory below it → its entries' names, sorted
	Files map[string]eventstore.Entry // file path → the artifact's listing entry
}
