// Package spill finds the spill files a session cites and decides which of them dshfs may serve.
//
// # Where locators come from
//
// The harness's spill policy (packages/spill/spill-policy; docs/harness.md#spill-notices) replaces an
// oversized plain-text tool result with a head/tail preview and a notice
//
//	(Omitted <N> bytes. Full formatted result stored at: <locator>. <retrievalHint>)
//
// where the local backend's locator is the absolute path of the spill file and its retrieval hint is
// "Use read with offset/limit, or grep this path to search within it." The notice is the whole text or
// follows the preview after a blank line. No JSON field records the locator: it exists only in that text,
// in a tool/result event (data.message.content[0].content[*].text) or in the durable tool/code-dispatch copy
// of a run_code sub-call result (data.content[*].text). Extract reads exactly those texts.
//
// # Which files are served
//
// Locators point outside the store, into directories dshfs does not own, so they are treated as
// untrusted: a path is served only when, after resolving every symlink, it names a regular file under a
// spill root. The roots are the harness's defaults — the per-process `dsh-spill-*` directories directly in
// os.TempDir() (matched at every check, because the harness makes a new one per process), $DSH_HOME/spill,
// and the spill directory of the home a store at HOME/sessions belongs to (HomeRoot) — plus configured ones. Classification never opens anything and never follows a path
// with anything but lstat, so a FIFO or device node cited by a log cannot block or trigger a driver; Open
// re-checks at open time and verifies the opened inode, so a swap between check and open is caught.
//
// # The index
//
// Index turns locators into the rows of a session's spill/index.json (docs/tree.md): one row per
// (citing seq, locator), numbered from 0, with the status at the time of the call. IndexJSON renders the
// rows as the CLI's `--view spill` and the mount's file, byte for byte.
package spill
