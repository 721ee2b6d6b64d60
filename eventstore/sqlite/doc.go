// Package sqlite is the harness's opt-in SQLite session store (schema 17, application id "DSHP") behind the
// eventstore backend seam: one database file holds every session, each as a `sessions` row and its
// `events` rows (docs/formats.md#sqlite).
//
// What the harness's format fixes, and so this package must reproduce exactly:
//
//   - The schema is checked by text. The harness compares the whitespace-collapsed `sqlite_schema` rows
//     with those its own DDL script produces, at open and again inside every mutation, so the DDL here is
//     the harness's script byte for byte and any extra object (an index, a view) makes a database foreign.
//     There is no migration: another user_version is refused with the harness's text.
//   - A row is not an event. A scalar row holds one event with its envelope in columns and its data as
//     JSON text (or a zstd BLOB when that is smaller for 4 KiB or more); a packed row (ignorable = 0) holds
//     3..1024 consecutive streaming deltas of one append batch in at most 1 MiB of data. Packing depends on
//     exact serialized byte lengths, so writes encode exactly like JSON.stringify.
//   - The committed prefix is decided as the harness's scanRows decides it: a bad row at or before the
//     last row holding a turn/end is corruption (refused); after it, it starts a torn tail that only a
//     repair removes — and a repair here keeps the removed rows in a sidecar file beside the database, as
//     the JSONL backend keeps cut bytes.
//   - `sessions.revision` goes up by one with every committed change; the harness caches prepared sessions
//     by it, so a writer that forgot would make the harness serve a stale log.
//
// Reading never writes: a read-only backend opens the file with mode=ro, changes no journal mode and
// initializes nothing; a database never initialized reads as an empty store.
//
// One file holds many sessions, so the per-session single-writer lock cannot be a lock on the file: it is
// an flock on a lock file per session in `<database>.locks/`, beside the database. The harness takes no
// such lock; its writes are caught by the revision and next-seq checks inside BEGIN IMMEDIATE.
package sqlite
