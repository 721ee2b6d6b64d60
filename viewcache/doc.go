// Package viewcache keeps what the mount has decoded and rendered, so that a FUSE read goes nodes →
// viewcache → views and back without another system in between. Its one entry point is Cache.Get (with
// Stat, its size-only twin, and Kept, which never renders), keyed by a Key: a session id, a view and a
// typed eventstore.Revision, compared as a value and never spelled into a string.
//
// Behind Get are three layers, each consulted before the next:
//
//   - the rendered-view LRU (lru.go): views by (session, view), each valid at the revision it was
//     rendered at, within [cache] views_bytes;
//   - the persistent per-revision index (index.go, pack.go), optional ([cache] index): per session and per
//     artifact revision, whether the session reads, and the size, checksum and bytes of each whole view
//     rendered, on disk under [cache] dir, so that a remount or an evicted session is warm;
//   - the decoded-session LRU (lru.go): snapshots by session, within [cache] sessions_bytes, loaded
//     through the Loader the mount gives (one load for concurrent askers).
//
// With the index off, Get answers the same bytes from the LRUs alone and decodes again what they evicted.
//
// # The index directory
//
// The directory ([cache] dir, default $XDG_CACHE_HOME/dshfs, then "index" below it) may be shared by many
// stores and many processes, and deleted at any time: it is rebuilt as sessions are read. It holds:
//
//	<pack>.pack          one per store: every session's entry (below)
//	<key>.<view>         a view of blobMin (1 MiB) or more, in a file of its own
//	*.tmp-*              a view file or a compacted pack being written; removed after an hour (staleTemp)
//	<key>.idx            an entry file of an earlier version; removed once the pack has no entry for it
//
// <pack> is 32 hex digits of SHA-256("pack\x00" + salt), and a session's <key> 32 hex digits of
// SHA-256(salt + "\x00" + id), where salt spells the Store: the backend name, the store root and the
// writer's line and frame limits, NUL-separated. A session's verdict depends on the limits, so a mount
// with other limits uses other entries; ids may hold any character, so they are hashed into names.
//
// # Entries
//
// An entry is one session at one artifact revision. Its text is UTF-8 lines, LF-terminated, in this
// order:
//
//	dshfs-index 4
//	session "<id>"                      Go-quoted
//	artifact "<token>"                  the artifact's revision token (JSONL: dev:ino:size:mtime:ctime)
//	identity "<identity>"               the artifact's storage identity
//	mtime <unix nanoseconds>            the session's data-derived time
//	view <name> <size> <sha256> <where> one per view kept, in a fixed order: header, raw, events,
//	                                    surface, messages, shadowed
//	sha256 <hex>                        of every byte of the text before this line
//
// <where> is "inline" for a view kept inside the entry, else a view file's stamp (device, inode, size,
// mtime and ctime, as eventstore.FileToken spells it) when it was written or last verified, or "-" when
// unknown. The bytes of the inline views follow the sha256 line, concatenated in the order of their lines;
// an entry's length must be exactly its text plus those sizes.
//
// Only whole views whose bytes depend on the stored log alone are indexed (not status.json, whose results
// change without a new revision, nor the spill index, whose truth lives outside the store), and never a
// session this process holds live. An entry is trusted only for the artifact and identity it names, only
// for the session it names, and only when its text checksum matches; anything else — a line that does not
// parse, a duplicate view, a size that does not add up — makes the whole entry absent, never partly
// served. An inline view is hashed each time it is read back. A view file is served without hashing while
// its stamp is the one the entry names; otherwise it is hashed, served only if the checksum matches, and
// its new stamp remembered. View files are renamed over, never rewritten, because a reader may hold one
// open (a Blob over it).
//
// # The pack
//
// The pack is an append-only sequence of records, one file per store:
//
//	dshfs-pack 1 <key> <length>\n<body>
//
// <key> is 32 lowercase hex digits, <length> the body's length in decimal (no sign, no leading zero, at
// most packBodyMax), and the body an entry as above. A key's last record is its entry; earlier ones are
// garbage. A record with an empty body is a tombstone: its key has no entry any more (a session removed
// from the store, purged when the watcher saw it go, or at the first pass of a mount for sessions that
// went while none watched). Framing is all the pack checks — the entry's own checksums decide what is
// served — and framing never searches past a record that does not frame for the next header, so bytes
// inside a body can never be taken for a record.
//
// # Locking
//
// Every append holds an exclusive flock(2) on the pack file, so records never interleave. Under the lock
// a writer first frames what others appended since it last looked; whatever does not frame then can only
// be a dead writer's torn append (no live writer appends without the lock), and is cut off. Readers frame
// without the lock, stop at what does not frame, and look again later: a record being appended frames once
// it is whole. Within a process, a mutex orders the writes of entries and the renames of view files, so an
// entry never names the stamp of a file another writer has since renamed over, and the inline bytes an
// entry carries over from its previous record are the ones this process last wrote there.
//
// A process appends its records in batches (pack.go, queueRec): up to 64 records or 1 MiB in one write,
// when the batch is full, 50 ms after its first record, before a tombstone and at the mount's end (Close).
// It reads its own queued records from the batch's buffer; another process sees them once appended, and a
// crash loses at most the batch, whose entries are then rendered again.
//
// # Compaction
//
// When the pack is past packCompactMin (32 MiB) and more than half of it is garbage, the writer that
// notices compacts it in the background: it copies the live records into a temporary file without any lock
// (framed records never change), then, holding the mutex and the old file's flock, copies the records
// appended meanwhile and renames the new file over the pack. Another process notices at its next append
// that the path names another file (device and inode) and switches to it; until then it reads the old
// file, whose records stay valid while it is open. A compaction that fails leaves the pack as it was and
// is not tried again until the pack has grown by packCompactMin more.
package viewcache
