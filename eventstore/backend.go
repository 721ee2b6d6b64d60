package eventstore

import (
	"context"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/eventstore/generation"
)

// Entry is one session found by List: read from its header alone.
type Entry struct {
	ID         string        // the session id (decoded directory name, or the header id)
	ProjectDir string        // JSONL: the project directory name; "" for other backends
	Path       string        // artifact path
	Header     *event.Header // nil when the header could not be read
	HeaderLine []byte        // the first line verbatim (no LF) when it is a JSON object, else nil
	Revision   string        // opaque change token; "" when the artifact could not be stat'ed
	Identity   string        // the artifact's storage identity (Artifact.Identity)
	ModTime    time.Time     // when the artifact last changed; zero when it could not be stat'ed
	Owner      *Owner        // the artifact's owner and permission bits; nil when unknown
	Refusal    error         // why the harness would not list or open this session; nil when listed
	// Host is the session's source host in a store of many hosts' sessions (a fleet store: the host that
	// synced it, or that wrote it there); "" for backends of one host's store.
	Host string
	// Generation is the format generation of the artifact (JSONL: 0 for session.jsonl, N for
	// session.vN.jsonl); only generation 0 is ever written.
	Generation int
	// Beside are the session's other generation files kept beside its artifact (JSONL: the older
	// generations an upgraded harness leaves untouched when it publishes a newer one, and generation files
	// in the other encoding, for which the session is refused). They are never read as the session; store/
	// and backups carry them byte for byte. Nil where a backend has none.
	Beside []string
}

// RootError is a problem of the store root itself (mixed encodings, flat-layout files). It is reported beside
// the sessions instead of hiding them, unlike the harness, whose list() fails as a whole.
type RootError struct {
	Path    string `json:"path"`
	Message string `json:"message"`
}

// Listing is the result of List: sessions in a stable order plus root errors.
type Listing struct {
	Entries    []Entry
	RootErrors []RootError
}

// Torn describes what lies after the committed prefix that a repair would drop.
type Torn struct {
	TruncateTo int64 // JSONL: the artifact is cut back to this size by a repair
	Bytes      int64 // physical bytes past the committed prefix
	Recovered  int   // JSONL: events decoded from a torn zstd frame (re-appended by a repair)
	// Seq is, in a backend of rows (SQLite), the seq of the first torn row: a repair deletes the rows
	// from it on (the harness's tornMarker).
	Seq int64
}

// Artifact is what a backend knows of a stored session's physical state without reading its content.
type Artifact struct {
	// Token changes whenever the stored bytes change (JSONL: `<dev>:<ino>:<size>:<mtimeNs>:<ctimeNs>`,
	// the harness's revision token). Only compared for equality, never parsed.
	Token string
	// Identity names the artifact's storage, not its bytes: it changes when the artifact is replaced (a
	// new file renamed over it), never when it grows (JSONL: `<dev>:<ino>`). The mount gives a replaced
	// artifact's files new inodes, so a reader holding the old ones keeps its snapshot. "" when unknown.
	Identity string
	ModTime  time.Time // when the artifact last changed
	Size     int64     // physical bytes
	Owner    *Owner    // nil when the backend has no per-session owner
}

// FileToken is a file's change token, `<dev>:<ino>:<size>:<mtimeNs>:<ctimeNs>`: equal tokens mean the same
// bytes, since no one can set a file's ctime (to the clock's tick). ok is false where the platform gives no
// inode and ctime. It is the JSONL artifact's Token, and the stamp the mount's index keeps of its view files.
func FileToken(fi os.FileInfo) (token string, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return "", false
	}
	// strconv rather than Sprintf: a listing makes one token per session
	b := make([]byte, 0, 80)
	b = strconv.AppendUint(b, uint64(st.Dev), 10)
	b = append(b, ':')
	b = strconv.AppendUint(b, st.Ino, 10)
	b = append(b, ':')
	b = strconv.AppendInt(b, st.Size, 10)
	b = append(b, ':')
	b = strconv.AppendInt(b, st.Mtim.Nano(), 10)
	b = append(b, ':')
	b = strconv.AppendInt(b, st.Ctim.Nano(), 10)
	return string(b), true
}

// Frozen is the durable prefix of an artifact, as a backup copies it (docs/tree.md, store/): its first
// Size bytes end at a complete line (raw) or a complete zstd frame — at a flush point for a session this
// process writes — so a copy of them never ends in a torn record. ModTime is derived from the data: the
// time of the last event in the prefix (the header's createdAt when it holds none), so it changes exactly
// when the prefix does. Token is the artifact revision it was computed at.
type Frozen struct {
	Token, Identity string
	Size            int64
	ModTime         time.Time
}

// Freezer is implemented by backends whose store is a tree of artifact files (JSONL), which the mount's
// store/ mirrors file for file.
type Freezer interface {
	// Freeze computes the frozen prefix of the artifact at path. prev, an earlier answer for the same
	// path (or the zero value), lets an artifact that only grew be read from where prev ended.
	Freeze(ctx context.Context, path string, prev Frozen) (Frozen, error)
	// OpenArtifact opens the artifact at path for reading with the backend's safety rules (regular
	// files inside the root only, never blocking).
	OpenArtifact(ctx context.Context, path string) (*os.File, Artifact, error)
}

// Owner is who may read a session's artifact: the mount serves the session's files with these, so that
// no user reads through dshfs what they could not read in the store.
type Owner struct {
	UID, GID uint32
	Perm     uint32 // permission bits (0o777) of the artifact
}

// Prefix is what a backend read yields: the stored prefix before any normalization or validation.
type Prefix struct {
	Header event.Header
	Events []event.Event // packed rows expanded, torn fragment excluded
	// RowMembers has bit i (word i/64, bit i%64) set when Events[i] is a member of a chunk row the backend
	// validated, with a seq that is a non-negative safe integer (event.DecodeStored): the load checks then
	// know its envelope without scanning it. Nil, or shorter than Events, where a backend does not say.
	RowMembers []uint64
	// Packed are the chunk rows a load kept packed, when its sink asked for them (PackedSink): their
	// members are Events' hollow events (event.PackedRow). Empty: every event has its record.
	Packed   []event.PackedRow
	Artifact Artifact // the state the bytes were read at
	Path     string
	Torn     *Torn // nil when the artifact ends on a committed boundary
	// Generation is the artifact's format generation: 0 for the v0 log this package validates, 2, 3 or 4
	// for a later one, whose events the backend decoded and validated with the harness's codec (package
	// eventstore/generation): Inspect then applies no v0 check to them, and plans v4's repair for v4.
	Generation int
	// Later is a v4 log's logical header and inherited cut, as its codec restored them: what a v4 writer
	// checks its appends against. Nil for other generations.
	Later *LaterLog
}

// LaterLog is what a v4 writer keeps of its log beyond the events.
type LaterLog struct {
	Header generation.Header
	Cut    int64
	// Closers are the v4 repair of a log that ends inside an open turn (generation.Artifact.Repair), nil when it
	// is balanced; RepairErr says why no repair could be planned.
	Closers   []event.Event
	RepairErr error
	// Restored, when set, is the artifact the events were decoded from, whose restore's state at their end
	// spares a writer's first append a second walk of the log (generation.Artifact.CheckerFor). An engine
	// keeps it only until then.
	Restored *generation.Artifact
}

// WriterLock is a held single-writer lock of one session; Release gives it up.
type WriterLock interface{ Release() error }

// Backend is what a storage format implements (the harness's PersistenceBackend hooks). Shared semantics —
// validation, legacy normalization, crash repair, seq checks, the session engine — live above it.
//
// Every durable write names the artifact state the writer last saw (expect); when the artifact is no
// longer in that state (another process wrote it), the backend writes nothing and returns a *CommandError
// with Failure Busy and Code CodeConflict. Writes return the state they left the artifact in.
type Backend interface {
	// Name is the backend name status.json reports ("jsonl", "jsonl+raw", "sqlite").
	Name() string
	// List reads headers only.
	List(ctx context.Context) (Listing, error)
	// LoadStored reads the whole stored prefix of one session; *NotFoundError when absent.
	LoadStored(ctx context.Context, id string) (*Prefix, error)
	// ReadRaw returns the artifact text verbatim (zstd: complete frames decoded).
	ReadRaw(ctx context.Context, id string) ([]byte, error)
	// Locate returns the artifact path a header maps to, without I/O.
	Locate(h event.Header) (string, error)
	// Stat returns the artifact state of a stored session without reading its content. path, when not
	// empty, is where a listing or read found the artifact, which spares the backend a lookup.
	Stat(ctx context.Context, id, path string) (Artifact, error)
	// Lock takes the single-writer lock of a stored session without waiting; a *CommandError with
	// Failure Busy and Code CodeLocked when another process (or another Store) holds it.
	Lock(ctx context.Context, id string) (WriterLock, error)
	// Materialize publishes a new session with its first batch (possibly empty) atomically; it never
	// replaces an existing artifact.
	Materialize(ctx context.Context, h event.Header, batch []event.Event) (Artifact, error)
	// AppendBatch durably appends one batch (one zstd frame), cut back on failure. packing, when not nil,
	// holds each event's packing classification (event.PackingOf), computed when it was accepted, so that
	// the write parses nothing.
	AppendBatch(ctx context.Context, h event.Header, expect Artifact, batch []event.Event, packing []event.Packing) (Artifact, error)
	// CommitRepair truncates a torn tail (keeping the cut bytes) and appends recovered events plus
	// closers as one batch.
	CommitRepair(ctx context.Context, h event.Header, expect Artifact, torn *Torn, recovered, closers []event.Event) (Artifact, error)
	// KeepPending stores events that were accepted but could not be written beside the artifact, where
	// the harness's discovery does not look, and returns where.
	KeepPending(ctx context.Context, h event.Header, events []event.Event) (string, error)
}
