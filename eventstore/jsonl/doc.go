// Package jsonl is the JSONL session store of the harness's session-persistence-jsonl, byte-compatible in
// both encodings (docs/harness.md#jsonl-store-layout):
//
//	<root>/--<projectKey(cwd)>--/<encodeSegment(id)>/session.jsonl        compression "none"
//	<root>/--<projectKey(cwd)>--/<encodeSegment(id)>/session.jsonl.zstd   compression "zstd" (the default)
//	<root>/_no-cwd/<encodeSegment(id)>/...                                 sessions without a cwd
//
// One session is one logical JSONL text: a header line tagged "type":"session", then one record per line
// (an event, or a packed chunk row that expands to several assistant/chunk events), every line ending in
// LF. In zstd mode the text is a concatenation of standard, checksummed zstd frames: frame 1 holds the
// header line alone and every durable append batch adds exactly one frame.
//
// Reading follows the harness's rules for damage: in raw mode a final record without LF is a torn tail,
// and an unparsable line or a seq gap is a tolerated crash tail unless a later line carries a turn/end
// (then the committed region is corrupt); in zstd mode an incomplete final frame is torn (its complete
// blocks are recovered), while anything wrong inside a complete frame is corruption. Errors carry the
// harness's texts.
//
// Writing follows its durability rules: a new session is materialized with its first batch through an
// exclusive temp file that is fsynced and hard-linked into place (never clobbering a log), with directory
// fsyncs; an append is one fsynced write at EOF, cut back to the previous size on failure so a retry
// cannot leave a seq gap; a repair keeps the bytes it cuts in a sidecar file the harness's discovery
// ignores.
//
// Later harness releases write newer format generations as immutable files beside the older ones
// (session.vN.jsonl[.zstd]); discovery picks the numerically highest as the session, as the harness's
// resolver does, and never serves a predecessor in its place. This package reads and writes generation
// v0; a session whose current generation is another is refused (checkGeneration is where a reader of
// later generations plugs in), and no write lands beside a newer generation.
//
// Listing reads headers only, treats mixed encodings and flat-layout files as root errors that do not
// hide the other sessions, and turns every header the harness would skip or reject into a refusal with
// the text its inspect() would give.
package jsonl
