package jsonl

// Directory names of a JSONL root (docs/harness.md#jsonl-store-layout): a project directory per cwd
// (namecodec.ProjectKey, or NoCwdDir), a session directory per id (namecodec.EncodeSegment) inside it.

// NoCwdDir is the project directory of sessions whose header has no cwd.
const NoCwdDir = "_no-cwd"
