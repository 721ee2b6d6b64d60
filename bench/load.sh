#!/usr/bin/env bash
# bench/load.sh [N] — cold load of an N-event (default 500000) zstd session:
#   dshfs cat --view events STORE ID     vs     the harness's own inspect() (Node 22, pinned packages)
# Both read the same file written by bench/gensession; each is run RUNS times (default 5) after one warm-up
# of the page cache ("cold" = a fresh process that decodes the whole artifact, not a cold disk), alternating, and
# the median wall time and peak RSS of each and the ratio of the times are printed. With BASE=<revision>
# that revision's dshfs is measured too, in the same alternation (bench_base).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-500000}
RUNS=${RUNS:-5}
WORK=${BENCH_DIR:-${TMPDIR:-/tmp}/dshfs-bench}
mkdir -p "$WORK"
. bench/common.sh
bench_setup inspect.mjs
bench_base
load_session "$N"
FILE=$(find "$ROOT" -name session.jsonl.zstd)
echo "session: $FILE ($(stat -c %s "$FILE") bytes compressed)"

ours_events=$("$WORK/dshfs" cat --view events "$ROOT" bench | wc -l)
theirs_events=$("$NODE22" "$CACHE/inspect.mjs" "$ROOT" bench events | wc -l)
echo "events: dshfs $ours_events, harness $theirs_events"
measure "$WORK/dshfs" cat --view events "$ROOT" bench >/dev/null
o=(); h=(); b=()
for i in $(seq "$RUNS"); do
  o+=("$(measure "$WORK/dshfs" cat --view events "$ROOT" bench)")
  if [ -n "$BASEBIN" ]; then b+=("$(measure "$BASEBIN" cat --view events "$ROOT" bench)"); fi
  h+=("$(measure "$NODE22" "$CACHE/inspect.mjs" "$ROOT" bench events)")
done
ours=$(col 1 "${o[@]}"); theirs=$(col 1 "${h[@]}")
echo "dshfs cat --view events: ${ours}s, peak RSS $(( $(col 2 "${o[@]}") / 1024 )) MiB (medians of $RUNS)"
echo "harness inspect():       ${theirs}s, peak RSS $(( $(col 2 "${h[@]}") / 1024 )) MiB (medians of $RUNS)"
echo "ratio (harness / dshfs): $(awk -v a="$theirs" -v b="$ours" 'BEGIN{printf "%.2f", a/b}')x"
if [ -n "$BASEBIN" ]; then
  base=$(col 1 "${b[@]}")
  echo "base dshfs cat --view events: ${base}s, peak RSS $(( $(col 2 "${b[@]}") / 1024 )) MiB (medians of $RUNS)"
  echo "base ratio (harness / base dshfs): $(awk -v a="$theirs" -v b="$base" 'BEGIN{printf "%.2f", a/b}')x"
fi
