#!/usr/bin/env bash
# bench/list.sh [SESSIONS [PER]] — listing a SESSIONS-session (default 10000) zstd store of >= PER
# (default 50) events each:
#   dshfs ls STORE     vs     the harness's own list() (inspect.mjs STORE - list, Node 22, pinned packages)
# Each a fresh process that reads every header; one warm-up of the page cache, then RUNS (default 5) of
# each, alternating; medians of wall time and peak RSS, and the ratio of the times. With BASE=<revision>
# that revision's dshfs is measured too, in the same alternation (bench_base).
set -euo pipefail
cd "$(dirname "$0")/.."
SESSIONS=${1:-10000}
PER=${2:-50}
RUNS=${RUNS:-5}
WORK=${BENCH_DIR:-${TMPDIR:-/tmp}/dshfs-bench}
mkdir -p "$WORK"
. bench/common.sh
bench_setup inspect.mjs
bench_base
many_sessions "$SESSIONS" "$PER"
echo "store: $MANY ($(find "$MANY" -name session.jsonl.zstd | wc -l) sessions)"

ours_n=$("$WORK/dshfs" ls "$MANY" | wc -l)
theirs_n=$("$NODE22" "$CACHE/inspect.mjs" "$MANY" - list | wc -l)
echo "sessions listed: dshfs $ours_n, harness $theirs_n"
versus ls "list()" ls "$MANY" -- "$CACHE/inspect.mjs" "$MANY" - list
