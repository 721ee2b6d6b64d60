// Package eventstore is the seam between dshfs and a session store (docs/architecture.md#the-store-seam),
// with the logic every backend shares, reproduced from the harness's persistence coordinator:
//
//   - Store wraps a Backend (a storage format: eventstore/jsonl, eventstore/sqlite, eventstore/postgres;
//     what only some can do, such as Freezer, Leaser or Watcher, is an interface beside it) with the
//     operations of the harness's service: List (headers only), ReadFrom (the stored, normalized log; readFrom), Inspect
//     (plus the crash-repair closers in memory; inspect), Load (the repair committed; load), ReadRaw,
//     Create (a header-only session published at once), Append (one writer run: contiguous seqs, one
//     durable batch), Locate and Stat (the artifact's state as a value: token, mtime, size).
//   - Load validation and crash-repair planning run the harness's rules of package eventstore/load over
//     every load; a check's failure comes back as *CorruptionError (`stored session "<id>" failed
//     validation: …`), a format refusal as *UnsupportedError.
//   - Turns (turns.go). The status.json objects of docs/tree.md are rendered above the seam, by
//     eventstore/status.
//   - The session engine (Session): what a session is while this process writes it — its event list
//     (stored + pending), logical revision, incremental fold, write-behind batching and flush, the
//     backend's writer lock — and the write commands over it: Writer (a balanced session only: no implicit
//     repair), Resume, Create, Fork (the harness's checks and texts), with typed refusals (CommandError,
//     Failure) that status.json, the CLI and the mount's errnos all read from one table (failure.go).
//   - Capabilities a backend may add to the seam: a change feed (Watcher, and how far it vouches for
//     stats: WatchCoverage), which the mount follows whatever the backend. How parallel the heavy work
//     runs (Tuning) is given by the program, never picked here.
//   - The backend contract suite lives in eventstore/storetest.
//
// eventstore knows nothing of FUSE and never imports a backend; the command wires them together.
package eventstore
