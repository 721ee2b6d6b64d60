package jsonl

// Directory names of a JSONL root (spec/jsonl.md §1.2-1.3): a project directory per cwd
// (namecodec.ProjectKey, or NoCwdDir), a session directory per id (namecodec.EncodeSegment) inside it.

// NoCwdDir is the project directory of sessions whose header has no cwd.
const NoCwdDir = "_no-cwd"
