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
measure "$WORK/dshfs" ls "$MANY" >/dev/null
o=(); h=(); b=()
for i in $(seq "$RUNS"); do
  o+=("$(measure "$WORK/dshfs" ls "$MANY")")
  if [ -n "$BASEBIN" ]; then b+=("$(measure "$BASEBIN" ls "$MANY")"); fi
  h+=("$(measure "$NODE22" "$CACHE/inspect.mjs" "$MANY" - list)")
done
ours=$(col 1 "${o[@]}"); theirs=$(col 1 "${h[@]}")
echo "dshfs ls:        ${ours}s, peak RSS $(( $(col 2 "${o[@]}") / 1024 )) MiB (medians of $RUNS)"
echo "harness list():  ${theirs}s, peak RSS $(( $(col 2 "${h[@]}") / 1024 )) MiB (medians of $RUNS)"
echo "ratio (harness / dshfs): $(awk -v a="$theirs" -v b="$ours" 'BEGIN{printf "%.2f", a/b}')x"
if [ -n "$BASEBIN" ]; then
  base=$(col 1 "${b[@]}")
  echo "base dshfs ls:   ${base}s, peak RSS $(( $(col 2 "${b[@]}") / 1024 )) MiB (medians of $RUNS)"
  echo "base ratio (harness / base dshfs): $(awk -v a="$theirs" -v b="$base" 'BEGIN{printf "%.2f", a/b}')x"
fi
