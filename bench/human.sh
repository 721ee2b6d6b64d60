#!/usr/bin/env bash
# bench/human.sh [N [SESSIONS]] — the human views, each against the plain view of the same data in the same
# run: a fresh `dshfs cat` of an N-event (default 500000) zstd session's transcript, transcript page and
# usage picture against `dshfs cat --view events` of it (the decode every view starts with), and
# `dshfs index` (page 1: 1,000 sessions decoded) of a SESSIONS-session store (default 10000) against
# `dshfs ls` of it (headers only). Median wall time, peak RSS and output size of RUNS (default 5) runs
# each, alternating, after one warm-up.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-500000}
SESSIONS=${2:-10000}
RUNS=${RUNS:-5}
WORK=${BENCH_DIR:-${TMPDIR:-/tmp}/dshfs-bench}
mkdir -p "$WORK"
. bench/common.sh
go build -o "$WORK/dshfs" ./cmd/dshfs
go build -o "$WORK/gensession" ./bench/gensession
load_session "$N"
many_sessions "$SESSIONS" 50

# pair LABEL BASE_ARGS... -- ARGS...: RUNS alternating runs of dshfs BASE_ARGS and dshfs ARGS; prints the
# medians and the ratio of the times
pair() {
  local label=$1; shift
  local base=()
  while [ "$1" != -- ]; do base+=("$1"); shift; done
  shift
  measure "$WORK/dshfs" "$@" >/dev/null
  local a=() b=() i
  for i in $(seq "$RUNS"); do
    b+=("$(measure "$WORK/dshfs" "${base[@]}")")
    a+=("$(measure "$WORK/dshfs" "$@")")
  done
  local size basesize
  size=$("$WORK/dshfs" "$@" | wc -c)
  basesize=$("$WORK/dshfs" "${base[@]}" | wc -c)
  printf '%-34s %ss, peak RSS %s MiB, %s bytes | baseline (%s) %ss, %s MiB, %s bytes | %sx the time\n' "$label" \
    "$(col 1 "${a[@]}")" $(( $(col 2 "${a[@]}") / 1024 )) "$size" "${base[*]:0:2}" "$(col 1 "${b[@]}")" \
    $(( $(col 2 "${b[@]}") / 1024 )) "$basesize" "$(awk -v a="$(col 1 "${a[@]}")" -v b="$(col 1 "${b[@]}")" 'BEGIN{printf "%.2f", a/b}')"
}

echo "session: $ROOT ($N events); store: $MANY ($SESSIONS sessions); load average $(cut -d' ' -f1-3 /proc/loadavg)"
for v in transcript transcript-html usage usage-svg; do
  pair "cat --view $v" cat --view events "$ROOT" bench -- cat --view "$v" "$ROOT" bench
done
pair "index (page 1 of $SESSIONS sessions)" ls "$MANY" -- index "$MANY"
