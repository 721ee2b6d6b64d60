// Package postgres is the fleet store: every host's sessions in one PostgreSQL database, behind the
// eventstore backend seam, fed by `dshfs sync` and written by fleet mounts (docs/fleet.md).
//
// The schema (SchemaVersion, DDL) is modeled on the harness's SQLite schema 17 — a sessions row with its
// header and revision, one events row per stored line with packed chunk rows and compressed data — but a
// row holds the JSONL line itself, verbatim: the line the JSONL backend writes (event.PackRecords for a
// batch, unbounded like the JSONL codec) or the line `dshfs sync` read from a host's store. So every
// event's bytes come back exactly as stored, ReadRaw is the very JSONL text a JSONL store would hold, and
// a load decodes the rows with the event-package functions the JSONL scan uses. A line of CompressFrom
// bytes or more is kept as a zstd frame when that is smaller, as the SQLite codec keeps its data.
//
// A format v4 session (sessions.generation 4) is kept as its v4 file holds it — the physical header line
// and one row per physical row — and restored with the v4 codec as the JSONL backend restores a
// session.v4.jsonl; its writes store generation.PhysicalRow rows (v4.go). Supersede replaces a synced v0
// log by its v4 successor, keeping the v0 log in `kept`. A version-1 schema (before generations) is read
// as it is and migrated in place by the first writer (migrateSchema).
//
// Every committed write (Materialize, AppendBatch, CommitRepair, Ingest, Release) is one transaction that
// bumps the session's revision — part of the artifact token, so a mount or writer sees the change — and
// announces the session id on the NOTIFY channel dshfs_fleet, delivered at commit (Watch).
//
// One writer across hosts: Lock takes a session-level advisory lock on a connection held for the lock's
// life, and records the holder in the `writers` table so that a refusal names it. The server drops the
// lock with the connection; a write checks, in its transaction, that its connection still holds the lock
// and re-takes it when it can, so an engine's batch is written or refused, never dropped. A session a
// host's `dshfs sync` still feeds (sync_host set, sync_seen within Options.ReleaseAfter) is not writable
// here; Release (sync --release) or the idle period hands it over.
//
// Nothing accepted is lost: the rows a repair deletes, and accepted events a writer could not write
// (KeepPending), are kept as JSONL texts in the `kept` table — or, for pending events while the database is
// unreachable, in a local file under Options.PendingDir. Fleet sessions are served by a mount as the
// mounting user's, mode 0600: they are readable with that user's database credentials only.
//
// Reading never writes: a read-only Open runs no DDL (a read-only role suffices), and a database without
// the schema reads as an empty store. A database holding another schema version, or tables of these
// names laid out otherwise, is refused before anything is written.
package postgres
