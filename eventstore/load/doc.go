// Package load holds the harness's rules for a stored log, in the harness's order and with its texts:
// what its coordinator checks after a read and what its restore-mode Session constructor checks of every
// seed event. The store (package eventstore) runs them over every load and gives their refusals its
// types (docs/architecture.md#a-read):
//
//   - ReadStored: identity and format version (a refusal, *UnsupportedError), retired vocabulary and
//     the in-memory upgrade of older shapes (legacy.go), message shapes (validate.go), the vocabulary.
//   - Inspect: those, then the crash-repair plan (repair.go: tool results for unanswered calls, step/end
//     and turn/end {interrupted} for a log that ends inside a turn), then the header rules, envelope,
//     request/header, seq contiguity and the surface fold (package surface) over stored+closers. The
//     passes run block by block over a log as a backend decodes it (Progress, loadcheck.go); quick.go and
//     the plain-envelope readers let most events pass without a parse.
//   - The per-event rules the session engine applies to an append as a load would (CheckEnvelope,
//     CheckMessageEventShape, CheckSupportedRequestHeader, CheckSupportedEvents, MigrateEvent), the
//     unparsed envelope reader (ReadEnvelope) and the turn boundaries (OpenTurn, Balanced, HasTurnEnd).
//
// Nothing here reads or writes a store: the package sits below eventstore and imports only the event
// model and the surface fold.
package load
