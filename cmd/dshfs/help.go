package main

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/dshfs/dshfs/eventstore/event"
)

// Version is this build's version; HarnessRelease the harness release whose formats it reads and writes.
const (
	Version        = "0.2.0-dev"
	HarnessRelease = "dsh-0.1.0-rc.8"
)

// commandHelp is each command's synopsis and what it does, for `dshfs help CMD` and `dshfs CMD --help`.
var commandHelp = map[string]string{
	"mount": `dshfs mount [--config FILE] [--read-only] [--allow-other] [--nonempty] [--demo] [STORE] MOUNTPOINT
Mounts STORE at MOUNTPOINT and serves it in the foreground until SIGINT/SIGTERM (which flushes live sessions,
then unmounts; a second signal detaches). Writable unless --read-only: sessions/<id>/append takes events,
ctl files take commands (see the mount's README). STORE defaults to the config's store, else
$DSH_HOME/sessions, else ~/.dsh/sessions.
--read-only: no append, ctl or mkdir; nothing is ever written to the store (as read_only = true in the config).
--allow-other: lets other users (root included) use the mount, each judged by the modes the files show (FUSE
allow_other, as [fuse] allow_other in the config); a non-root user needs user_allow_other in /etc/fuse.conf.
Without it only the mounting user (and not even root) can enter the mount.
--nonempty: mounts over a MOUNTPOINT that is not empty, hiding its files until the unmount; without it such a
mountpoint is refused, so that forgetting MOUNTPOINT cannot mount over the directory meant as STORE.
--demo: ignores STORE and mounts a writable demo store built in a new temp dir (see dshfs help demo).`,
	"demo": `dshfs demo DIR
Writes a demo store to DIR/sessions (a clean session, a crashed one, a compacted one, a fork pair, one citing a
spilled tool result) and its spill file under DIR/spill: DIR is laid out as a dsh home, so every command
(mount DIR/sessions, cat, backup --with-spill) finds the spill file without configuration.`,
	"ls": `dshfs ls [--config FILE] [--json] STORE
Lists the store's sessions from their headers: id, state (ok|refused), createdAt, cwd, parentSession.
--json: one {id, projectDir, revision, header, refusal} object a line instead (plus host, the source host, in
a fleet store).`,
	"cat": `dshfs cat [--config FILE] [--inspect] [--view VIEW] STORE ID
Prints one view of a session, byte for byte what the mount's file holds. VIEW: events (default) | raw | header |
status | surface | messages | shadowed | transcript | transcript-html | usage | usage-svg | event:SEQ | turn:N |
trace:SEQ | compactions | prunes | spill.
--view VIEW: the view to print (default events).
--inspect: computes every view over the harness's in-memory crash repair (never written), as check reads it.`,
	"index": `dshfs index [--config FILE] [--page N] STORE
Prints page N (--page N, default 1) of the store's index as one HTML page, what a mount serves as index.html (page 2 as
index-2.html, …): every session newest first, 1,000 a page, with its state (ok, live, needs repair, refused),
last activity, turns, events, tokens, unknown tool outcomes, compactions and parent, each linking to
sessions/<id>/transcript.html (links relative to the mount's root).`,
	"check": `dshfs check [--config FILE] [--json] STORE [ID...]
Validates sessions as the harness's loader does (never repairing): one line per refused or corrupt session and
per root error. Exit 0: every session opens in the harness; 1: something was refused; 2: an id is missing or
the store cannot be read.
--json: one {id, kind, message} object a line instead (a root error with its path).`,
	"append": `dshfs append [--config FILE] [--force] STORE ID [FILE|-]
Appends newline-delimited events ({"type":…,"data":…} plus optional seq, time, surfaceOp, sourceEventSeqs,
ignorable) from FILE or stdin: all accepted together or none, then flushed and released. A session ending inside
an open turn must be resumed first. A session another process changed within [writer] foreign_quiet (a harness
before 0.1.5 writing it) is refused as live elsewhere; --force acknowledges that change once no harness runs it.`,
	"create": `dshfs create [--config FILE] [--cwd DIR] [--generation auto|0|4] STORE [ID]
Publishes a header-only session at once (default id: a new UUIDv4); the harness lists and opens it.
--cwd DIR: the session's cwd (absolute; default the current directory), which decides its project directory.
--generation: its format generation; default [writer] generation, "auto": v4 in a JSONL root or fleet store that
holds a v4 session (the 0.2.x harness's), else v0, which every release reads.`,
	"resume": `dshfs resume [--config FILE] [--force] STORE ID
The harness's resume: commits the crash repair (torn bytes kept in a sidecar, the interrupted closers) and a
session/end-seed. --force: as for append.`,
	"fork": `dshfs fork [--config FILE] STORE ID [BOUNDARY] [CHILD_ID]
The harness's fork: a child holding the parent's events 0..BOUNDARY (default: the last) and a session/end-seed,
with parentSession and seedLength in its header. Refused inside an open turn (OPEN_TURN).`,
	"compact": `dshfs compact [--config FILE] [--force] STORE ID [START END]
Manual compaction, as the harness's /compact: the summarizer of [compaction] (default: the built-in extractive
one) condenses everything but the newest surface node (or the surface range from seq START to seq END) into a
checkpoint that replaces it on the surface; every raw event stays in the log. Refused while a turn is open or a
compaction lock is live (exit 1); a summary that fails, is not smaller, or whose span changed meanwhile is
recorded as a failed compaction/end (a summarizer's failure exits 2, as an I/O error does). (prune needs a turn
held open by a live writer: it is a ctl command of the mount only.) --force: as for append.`,
	"backup": `dshfs backup [--config FILE] [--mount MNT] [--with-spill] [--allow-empty] STORE DEST
Copies STORE into DEST (new or empty), so that DEST is itself a store in the harness's layout, plus
MANIFEST.json (versions, backend, the expected totals — sessions as ls counts them, events as check reads
them, files — and per session its artifact's SHA-256, events and durable seq, its spill locators) and
spill-index.jsonl (every locator with its status). Through a running mount of STORE (found in /proc/mounts,
or --mount) the store is quiesced for the copy and MNT/store/ is copied: every artifact at its last flush,
one instant; without one, each session is copied under its writer lock. --with-spill also copies the
present spill files (from inside the spill roots only) into DEST/spill/.
Refused (exit 1, nothing copied): a STORE with root errors (see dshfs ls STORE); a STORE inside a dshfs
mount (back up the mount's real store, the "root" of MNT/status.json, or copy MNT/store/ with rsync); a
--mount MNT serving another store; a STORE of no sessions, unless --allow-empty. A dshfs mount that does
not answer within 3 s (a stopped or wedged dshfs) is skipped with a warning naming it.
A fleet store (postgres://…) has no files: DEST becomes a JSONL store of its sessions (each from one read,
built beside DEST and moved into place only when whole), which verify proves; a read-only role suffices.`,
	"verify": `dshfs verify [--config FILE] DEST
Checks a backup: check's findings, the manifest's checksums and sizes, every listed session present holding
its events (seqs contiguous from 0, the header naming it), surface and messages derivable, nothing unlisted,
and the sessions, events and files of the copy equal to the totals recorded when it was taken. One line per
problem (ID, kind, message); with none, one summary line ("verified: 5 sessions, 312 events, 5 files", and
a warning on stderr when that is no session). Exit 0 when there is no problem, 1 when there are, 2 when DEST
cannot be read.`,
	"restore": `dshfs restore [--config FILE] [--allow-empty] [--force] BACKUP DEST
Verifies BACKUP, then copies its artifacts into DEST — a new or empty directory only — checking each copy's
SHA-256; BACKUP is only read. Refused: a backup that does not verify (--force restores it anyway, each
problem printed as a warning), and a backup of no sessions (--allow-empty restores it as an empty store).
Then "dshfs mount --read-only DEST MNT" serves the restored store.`,
	"convert": `dshfs convert [--config FILE] [--verify] [--session ID]... SRC DST
Copies every session of SRC into DST across backends (JSONL raw, JSONL zstd, SQLite, a fleet store
postgres://…; a new DST named *.db,
*.sqlite or *.sqlite3 is a SQLite database, else a JSONL root with the config's writer.compression): the stored
log of each, headers and logical events identical. One line per session (outcome, id, events, reason).
Resumable: a session already identical in DST is skipped, one DST holds a prefix of is completed, one that
differs is refused and never overwritten. Sessions SRC refuses or DST cannot hold as written are skipped by
name and reason; a torn tail is not part of the stored log and is left behind (reported). --verify re-reads DST
and compares events and the surface a resume derives. --session ID (repeatable, or SRC
postgres://…/db?session=ID) converts only that session — a handover: the harness resumes it in DST; an ID
SRC lacks is reported "missing". A progress bar on a terminal. Exit 0: all converted; 1: something was
skipped or differs; 2: an I/O or connection error, or a missing session.`,

	"sync": `dshfs sync [--config FILE] [--watch] [--release ID] [--host NAME] SRC DST
Copies every session of this host's store SRC (a JSONL root, raw or zstd, or a SQLite database; only ever
read, never repaired) into the fleet store DST (postgres://… or postgresql://…): its header and its stored
lines past what DST holds, in transactions of at most 1,000 lines or 4 MiB, so that a run killed at any
moment and run again leaves no gap, no duplicate and no partial batch. A live session is copied up to its last
complete line or zstd frame, an interrupted one as stored (a torn tail is left behind and reported). Sessions
are recorded as this host's (--host, default [fleet] host or the host name): the same id held from another host is refused
unless the copies are identical, never merged or overwritten. Sessions SRC refuses, and those of format
generation v2 or v3, are skipped. A v4 session (harness 0.2.x) is copied as v4; one synced as v0 that the
harness upgraded since is carried as v4 when its v4 log holds the copy's events (the v0 copy kept in DST),
else marked stale there. One line per session on stdout (status, id, events and bytes copied,
the events DST holds, a reason): copied | unchanged | identical | released | refused | skipped | failed; a
summary on stderr; a progress bar on a terminal.
--watch: then follows SRC (inotify, and a pass every 30 s) and copies new lines as they land, one line per
copy (led by the time), until SIGINT or SIGTERM.
--release ID: after the pass, releases session ID (this host's): it is no longer synced, and becomes writable
through the fleet store.
Exit 0: everything copied or already there; 1: something was refused or skipped; 2: a usage or I/O error, a
session failed, or a signal ended the run before its first pass did.`,
	"pg": `dshfs pg init [--config FILE] DSN
Creates the fleet store's schema in the PostgreSQL database DSN (postgres://… or postgresql://…, libpq rules:
PG* environment variables and ~/.pgpass apply), or checks the one there: idempotent. Any write to a fleet
store (sync, create, append…) does the same on an empty database; this does it explicitly, e.g. as the
database's owner before granting a read-only role. A version-1 schema is migrated to version 2 in place
(run it as the role that owns the schema). A database holding another fleet schema version, or
tables of the fleet schema's names laid out otherwise, is refused (exit 1) with nothing written; a DSN that
does not parse, a refused login or an unreachable server exit 2. The password never appears in the output.`,
	"version": `dshfs version
Prints dshfs's version, the harness release and the session format version it reads and writes.`,
	"help": `dshfs help [CMD]
Prints the usage of every command, or of CMD.`,
}

// printHelp writes one command's help, or the whole usage.
func printHelp(w io.Writer, cmd string) error {
	if cmd == "" {
		_, err := fmt.Fprint(w, usage)
		return err
	}
	if _, ok := commandHelp[cmd]; !ok {
		return &usageError{fmt.Sprintf("no command %q (commands: %s)", cmd, strings.Join(commandNames(), ", "))}
	}
	_, err := fmt.Fprintln(w, helpText(cmd))
	return err
}

// configHelp explains --config once for every command that takes it.
const configHelp = `--config FILE: read the TOML configuration FILE (docs/configuration.md) instead of the defaults.`

// helpText is one command's whole help: its text, and the --config line when its synopsis offers --config.
func helpText(cmd string) string {
	h := commandHelp[cmd]
	if synopsis, _, _ := strings.Cut(h, "\n"); strings.Contains(synopsis, "--config") {
		h += "\n" + configHelp
	}
	return h
}

// commandNames are the commands that have help, sorted.
func commandNames() []string {
	var names []string
	for n := range commandHelp {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// wantsHelp reports whether a command's arguments ask for its help.
func wantsHelp(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if a == "--help" || a == "-h" {
			return true
		}
	}
	return false
}

func versionText() string {
	return fmt.Sprintf("dshfs %s (reads and writes DeepSeek Harness %s session stores, format version %d)\n",
		Version, HarnessRelease, event.FormatVersion)
}
