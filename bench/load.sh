#!/usr/bin/env bash
# bench/load.sh [N] — cold load of an N-event (default 500000) zstd session:
#   dshfs cat --view events STORE ID     vs     the harness's own inspect() (Node 22, pinned packages)
# Both read the same file written by bench/gensession; each is run RUNS times (default 5) after one warm-up
# of the page cache ("cold" = a fresh process that decodes the whole artifact, not a cold disk), alternating, and
# the median wall time and peak RSS of each and the ratio of the times are printed. With BASE=<revision>
# that revision's dshfs is measured too, in the same alternation (bench_base). Then the floor: `zstd -dc` of
# the same file, alternating with dshfs, wall and CPU time.
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
versus "cat --view events" "inspect()" cat --view events "$ROOT" bench -- "$CACHE/inspect.mjs" "$ROOT" bench events

# the floor: zstd -dc of the same file (one thread), alternating with dshfs; wall and CPU (user + system)
# medians, since dshfs decodes on every core and zstd on one
cpu_of() { /usr/bin/time -f '%e %U %S' -o "$WORK/load.time" "$@" >/dev/null && awk '{printf "%s %.2f\n", $1, $2 + $3}' "$WORK/load.time"; }
o=() z=()
for i in $(seq "$RUNS"); do
  o+=("$(cpu_of "$WORK/dshfs" cat --view events "$ROOT" bench)")
  z+=("$(cpu_of zstd -dc "$FILE")")
done
ow=$(col 1 "${o[@]}") oc=$(col 2 "${o[@]}") zw=$(col 1 "${z[@]}") zc=$(col 2 "${z[@]}")
echo "zstd -dc of the file:          ${zw}s wall, ${zc}s CPU (medians of $RUNS)"
echo "dshfs cat --view events:       ${ow}s wall, ${oc}s CPU (same runs)"
echo "ratio (dshfs / zstd -dc): $(awk -v a="$ow" -v b="$zw" 'BEGIN{printf "%.2f", a/b}')x wall, $(awk -v a="$oc" -v b="$zc" 'BEGIN{printf "%.2f", a/b}')x CPU"
