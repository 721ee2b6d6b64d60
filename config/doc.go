// Package config reads dshfs's TOML configuration (docs/configuration.md): every key is optional, defaults are
// applied, and the whole schema is validated at load time so that a typo or a bad value fails the command
// that reads the file instead of being silently ignored.
//
// # Schema and effect
//
//	key                     type      default and allowed values                      effect
//	store                   path      $DSH_HOME/sessions, else ~/.dsh/sessions        mount's STORE when none is given
//	read_only               bool      false                                           mount read-only
//	fuse.entry_timeout      duration  1s (>= 0)                                       kernel entry cache for changing views
//	fuse.attr_timeout       duration  1s (>= 0)                                       kernel attribute cache
//	fuse.refresh_interval   duration  1s (> 0)                                        store revision re-check period
//	fuse.allow_other        bool      false                                           FUSE allow_other
//	cache.sessions_bytes    size      32MiB (>= 0; 0 caches nothing)                  decoded-session LRU budget
//	cache.views_bytes       size      16MiB (>= 0; 0 caches nothing)                  rendered-view LRU budget
//	cache.index             bool      true ($DSHFS_CACHE_INDEX = "off" makes it false)  the persistent per-revision index behind the LRUs
//	cache.dir               path      "" = $XDG_CACHE_HOME/dshfs, else ~/.cache/dshfs   the persistent per-revision index
//	writer.batch_window     duration  200ms (>= 0; 0 writes at once)                  write-behind window of the live writer
//	writer.compression      string    "zstd" | "none"; default "zstd"                 encoding of a root holding no session yet
//	writer.max_line_bytes   size      64MiB (>= 0; 0 = no limit)                       longest event line, appended or read
//	writer.max_frame_bytes  size      256MiB (>= 0; 0 = no limit)                      largest decoded zstd frame read
//	writer.max_session_bytes size   1GiB (>= 0; 0 = no limit)                         most one session's decoded events may cost
//	writer.live_bytes       size      32MiB (>= 0; 0 = no budget)                     what the live engines' logs may hold in memory
//	writer.live_idle        duration  1m (0, or >= 1s; 0 = only the budget)           idle time after which an engine releases its log
//	compaction.summarizer   string    "extractive" | "command"; default "extractive"  who writes a manual compaction's summary
//	compaction.command      [string]  []; non-empty when summarizer = "command"       the summarizer program (JSON in, summary out)
//	compaction.timeout      duration  5m (> 0)                                        how long the summarizer may run
//	compaction.provider     string    "dshfs"                                         the checkpoint's source provider
//	compaction.model        string    the summarizer's name                           the checkpoint's source model
//	compaction.max_tokens   integer   8192 (> 0)                                      the summarizer's output budget
//	pruner.threshold_chars  integer   8192 (> 0)                                      tool results longer than this are pruned
//	pruner.head_chars       integer   4096 (>= 0)                                     code points a pruned result keeps from its head
//	pruner.tail_chars       integer   1024 (>= 0)                                     code points a pruned result keeps from its tail
//	spill.roots             [path]    []                                              extra spill roots beside the defaults
//	sqlite.journal_mode     string    "wal" | "delete" | "truncate" | "persist"       journal mode of a SQLite store's read-write connections
//	sqlite.busy_timeout     duration  5s (> 0)                                        how long a SQLite statement waits for another's lock
//	fleet.release_after     duration  10m (> 0)                                       idle time after which a synced session is writable in a fleet store
//	fleet.host              string    "" = os.Hostname()                              this host's name in a fleet store
//	fleet.timeout           duration  10s (> 0)                                       how long a fleet operation waits for the server to answer
//
// # Value rules
//
//   - Durations are strings in Go syntax ("1s", "200ms", "5m"); a TOML number is refused because its unit
//     would be a guess. Negative durations are always refused; zero only where it means something (see
//     the table).
//   - Sizes are a TOML integer (bytes) or a string of digits with an optional binary unit: "B", "KiB",
//     "MiB", "GiB" or "TiB" (one optional space before the unit). Decimal units ("MB", "KB") are refused
//     rather than guessed at, because "256MB" is ambiguous between 10^6 and 2^20 in common usage.
//   - The pruner mirrors the harness's ToolResultPruneConfig validation
//     (docs/harness.md#compaction-transactions), quoting its messages: threshold_chars positive, head_chars
//     and tail_chars non-negative, and head_chars + the 39-code-point PRUNE_MARKER + tail_chars at most
//     threshold_chars.
//   - Paths (store, spill roots) expand a leading "~" or "~/" against the user's home exactly as the
//     harness's expandHomePath does; any other "~user" form is left as it is. A relative path is resolved
//     against the directory of the configuration file, so a file means the same thing from any working
//     directory. store may carry a backend prefix ("jsonl:", "jsonl+raw:", "sqlite:") as on the command
//     line; expansion applies to the path after it. A store beginning "postgres://" or "postgresql://"
//     is a fleet store's DSN and is kept as written.
//
// # Errors
//
// Every problem names its key with its table path. Unknown keys read `unknown key "fuse.atr_timeout" in
// dshfs.toml`; bad values read `key "fuse.attr_timeout" in dshfs.toml: <why>`. All problems in a file are
// reported together (one per line, in document order for unknown keys, then in schema order), each as a
// *KeyError reachable with errors.As.
package config
