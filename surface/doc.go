// Package surface is the harness's model-visible surface over a session log: the fold that turns
// surfaceOp markers into the ordered list of message-producing events (foldSurface and the
// incremental SurfaceManager of packages/core/session/src/surface.ts), the messages that list derives
// to (deriveMessages), the current/shadowed/log-only classification and event trace of session-query,
// and compaction's tool-call/result pairing balance.
//
// Every validation failure carries the harness's exact text, because the store layer embeds it in
// "invalid seed event at index N: …" and a dshfs user comparing diagnostics with the harness must see
// the same words.
//
// # Cost
//
// Fold runs on every session load, over logs that are mostly assistant/chunk events. Only the three
// surface types are parsed at all (and then only their small envelope members); every other event is
// checked for stray surfaceOp/sourceEventSeqs members by scanning its canonical bytes. Replace ranges
// are located by surface position; a seq→position map is built only once a surface is long enough
// to need one, kept valid across appends and single-node rewrites (prunes), and rebuilt lazily after
// a multi-node splice (compaction), whose own cost is already linear in the surface length.
package surface
