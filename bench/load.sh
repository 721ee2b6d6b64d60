#!/usr/bin/env bash
# bench/load.sh [N] — cold load of an N-event (default 500000) zstd session:
#   dshfs cat --view events STORE ID     vs     the harness's own inspect() (Node 22, pinned packages)
# Both read the same file written by bench/gensession; each is run RUNS times (default 5) after one warm-up
# of the page cache ("cold" = a fresh process that decodes the whole artifact, not a cold disk), and the
# median wall time of each and their ratio are printed.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-500000}
RUNS=${RUNS:-5}
WORK=${BENCH_DIR:-${TMPDIR:-/tmp}/dshfs-bench}
mkdir -p "$WORK"
. bench/common.sh
bench_setup inspect.mjs
load_session "$N"
FILE=$(find "$ROOT" -name session.jsonl.zstd)
echo "session: $FILE ($(stat -c %s "$FILE") bytes compressed)"

timeit() { # prints wall seconds of one run of "$@", output discarded
  local s e; s=$(date +%s%N); "$@" >/dev/null; e=$(date +%s%N); awk -v a="$s" -v b="$e" 'BEGIN{printf "%.4f\n", (b-a)/1e9}'
}
ours_events=$("$WORK/dshfs" cat --view events "$ROOT" bench | wc -l)
theirs_events=$("$NODE22" "$CACHE/inspect.mjs" "$ROOT" bench events | wc -l)
echo "events: dshfs $ours_events, harness $theirs_events"
timeit "$WORK/dshfs" cat --view events "$ROOT" bench >/dev/null
ours=$(for i in $(seq "$RUNS"); do timeit "$WORK/dshfs" cat --view events "$ROOT" bench; done | median)
theirs=$(for i in $(seq "$RUNS"); do timeit "$NODE22" "$CACHE/inspect.mjs" "$ROOT" bench events; done | median)
echo "dshfs cat --view events: ${ours}s (median of $RUNS)"
echo "harness inspect():       ${theirs}s (median of $RUNS)"
echo "ratio (harness / dshfs): $(awk -v a="$theirs" -v b="$ours" 'BEGIN{printf "%.2f", a/b}')x"
