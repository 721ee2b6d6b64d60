// Package compaction reads DeepSeek Harness compaction transactions back out of a session log: one
// Record per compactionId (the compactions/<compactionId>.json views and status.json's
// activeCompaction) and one Prune per compaction/prune event (compactions/prunes.jsonl).
//
// The harness writes these events but never validates them at load (they are log-only plugin events;
// only the optional invariant companion checks them live), so a log it accepted may hold brackets no
// harness would write. The read side therefore classifies rather than rejects: every compaction/*
// event of the log lands in exactly one Record or Prune, and Records fails only where a marker cannot
// be attributed to one transaction at all (see Records).
//
// # Transaction states
//
// A transaction is the compaction/start, compaction/summary and compaction/end sharing one
// compactionId, plus the checkpoint user/message that immediately follows the summary (the
// shadow-price protocol: the metering event is immediately followed by the replacement it prices).
//
//   - complete: start, summary, checkpoint replacement and an end without an `error` key, the end
//     after the start.
//   - failed: an end (after the start) carrying an `error` key, whatever its value (the harness tests
//     `error === undefined`, so even `"error":null` is a failure); or an end without one but missing
//     the summary (the invariant companion's "successful compaction/end requires one
//     compaction/summary") or missing the checkpoint (the surface never changed, though the harness
//     appends summary and checkpoint back to back); or markers without any compaction/start (the
//     companion's "... has no matching compaction/start"): startSeq is then null, and such a record
//     never holds the lock.
//   - open: a start with no end after it that holds the session compaction lock exactly as the
//     harness's inspectCompactionEntryState/assertCompactionInactive decide: it is the newest
//     compaction/start-or-end marker of the log (of any id) and no session/end-seed has a larger
//     seq. At most one record is open; Active returns it.
//   - stale: a start with no end after it that does not hold the lock: a later session/end-seed
//     proves it belongs to an ended lifecycle (crash, resume, fork out of a compacting parent), or a
//     later start/end marker of another id hides it from the harness's backward scan. Crash repair
//     never writes compaction/end, so stale starts stay in the log for good.
//
// An end that precedes its own start does not close it (the harness's backward scan would still see
// the start as unmatched).
//
// # Record JSON
//
// Record.JSON is one compact object with the keys in this order:
//
//	{"compactionId","state","turn","sourceCommandId","startSeq","summarySeq","replacementSeq","endSeq","shadowedRange","shadowedSeqs","shadowedTokenCount","error"}
//
// Their values:
//
//   - the four seqs are numbers, or null when that event is absent;
//   - turn is data.turn of the start as recorded (a number for a turn-owned automatic compaction,
//     null for a manual /compact); without a start, the end's data.turn; null when neither has one;
//   - sourceCommandId is the start's, else the summary's, else the end's, null when none has one;
//   - shadowedRange ({"start","end"}) and shadowedSeqs come from the surface fold's replacement for
//     the checkpoint when the fold has one, else as recorded on the summary; with no summary they are
//     null and [];
//   - shadowedTokenCount is the summary's, null without a summary;
//   - error is the end's `error` value as recorded (a string in every harness log), null when absent.
//
// Values the log recorded are echoed as JSON.stringify would print them, never reinterpreted.
//
// # Prune JSON
//
// Prune.JSON is {"seq","replacementSeq","shadowedRange","shadowedSeqs","shadowedTokenCount"}:
// replacementSeq is the seq of the replacing tool/result that immediately follows the prune (null when
// the next event is not a tool/result with a replace surfaceOp); range and seqs prefer the fold's
// replacement as above, else the prune's own fields; absent fields print null.
//
// # Why the fold wins
//
// The harness accepted the log, so the fold's replacement is what actually left the surface; the
// summary's shadowedRange/shadowedSeqs are the transaction's claim about it. They agree in every log
// the harness writes; where a hand-made log disagrees, the views show what the surface did.
package compaction
