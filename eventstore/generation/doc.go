// Package generation decodes the session artifacts of the harness's later format generations, v2 and
// v3 (`session.v2.jsonl[.zstd]`, `session.v3.jsonl[.zstd]`), into what the harness's published codec
// restores from them: the logical header, the inherited event count and the logical events, each event
// encoded exactly as JSON.stringify prints it. It knows nothing of files, stores or projections: callers
// hand it the artifact's bytes and the generation and encoding its file name states.
//
// # v2
//
// Format v2 is written by dsh-v0.1.3-alpha.1 and dsh-v0.1.3-alpha.2 (package
// @deepseek-ai/dsh-session-format-v1-to-v2). Its header line is `{"type":"session","version":2,…}`
// with exactly id, createdAt, isSeeded, delegationDepth and optional cwd, parentSession, origin and
// agentPreset; it stores no seedLength: the inherited event count is the seq of the last
// `session/end-seed` whose data is `{"inherited":true}`. Every later line is one event (no packed
// rows), numbered densely from 0. `assistant/chunk` is gone: a successful attempt's timed stream is
// embedded in `assistant/message.data.stream`, and an attempt that settled without a message is the
// log-only `assistant/attempt`. The only physical encoding beyond the logical event is
// `sourceEventSeqs`, where a run of three or more consecutive seqs may be written as a [start, end]
// pair; decoding expands it.
//
// # v3
//
// Format v3 is written from dsh-v0.1.5-alpha.1 on (the latest released generation; package
// @deepseek-ai/dsh-session-format-v2-to-v3). It keeps v2's framing and header with `version: 3`. The
// system prompt is a surface event, `system/message`, whose first append in the first step is the
// protected head that only a system message covering exactly that head may replace; `request/header`
// no longer carries `header.system`; `tool/code-dispatch*` became `tool/ptc-dispatch*`; every surface
// event carries `surfaceOp`, and a replacement is exactly `{op:"replace",startSeq,endSeq}`.
//
// # What is checked
//
// Decode applies what the published decode tool applies: the codec's row decoding (both generations'
// physical checks, v3's structural admission and canonical envelope checks), then the released restore
// (event admission by type, dense seqs, the inherited cut, v3's protected system head and open-step
// ownership of system messages, and the frozen cross-event relationship validation: turns and steps,
// tool lifecycles, PTC dispatch pairs, retries, titles, commands, compactions and surface replacements).
// Refusals carry the codec's own error text and class name, except where the harness's validation trips
// over a malformed payload with a JavaScript TypeError: that refusal is ClassTypeError with a text of
// dshfs's own.
//
// Framing follows the v0 rules (docs/harness.md#committed-prefix-and-torn-tails): a raw artifact's final line
// without LF is a torn tail and is excluded; a compressed artifact is a sequence of zstd frames (the header
// frame, then one frame per written batch), an incomplete final frame is torn and excluded whole, and a
// complete frame whose text does not end in LF is corruption.
package generation
