// Package event holds the session-log vocabulary every dshfs backend shares: a JSON value model that
// behaves exactly like JavaScript's JSON.parse/JSON.stringify, stored events as canonical bytes, the
// JSONL header line, the known event types, and the packed chunk rows the harness writes.
//
// # Why a JSON model of its own
//
// dshfs must write bytes the harness (TypeScript) would write and read back values the harness would
// see. encoding/json differs from JS in ways that break byte compatibility: it escapes <, >, & and
// U+2028/2029, maps lone surrogate escapes to U+FFFD, keeps duplicate keys, prints numbers differently
// and does not order integer-like keys first. Value mirrors a JS value instead:
//
//   - input bytes are decoded as the WHATWG UTF-8 decoder does (DecodeUTF8), then parsed strictly;
//   - numbers are float64 (overflow gives ±Inf, -0 keeps its sign) and print via FormatNumber, which
//     is Number.prototype.toString;
//   - strings are WTF-8, so "\ud800" survives a round trip;
//   - objects keep JS enumeration order: array-index keys ascending, then insertion order, with a
//     repeated key keeping its first position and its last value.
//
// Nesting deeper than MaxDepth (10000) is rejected with ErrTooDeep; V8 has no such limit, but no
// harness log comes close and the bound keeps a hostile line from exhausting the parser's stack.
//
// # Canonical bytes
//
// The harness writes every line as JSON.stringify of a value, so a well-formed log is already in
// canonical form. Canonical proves that in one allocation-free pass and returns the input unchanged;
// only unusual lines (hand-edited, whitespace, odd number spellings) go through Parse and Stringify.
// Event keeps those canonical bytes as its source of truth and caches the type and seq members;
// Lookup reads other members straight from the bytes.
//
// # Packed chunk rows
//
// A run of three or more streaming-delta assistant/chunk events is stored as one text-chunks,
// reasoning-chunks or tool-call-chunks row (docs/harness.md#packed-chunk-rows). DecodeStored validates and expands
// a row into the exact events the harness would produce; PackBatch encodes one durable batch the way
// the harness's writer does, so rewritten logs stay byte-identical.
package event
