#!/usr/bin/env bash
# bench/v4.sh [N] — format v4 against v0 on the same turns, in one run:
#   1. cold load: `dshfs cat --view events` of an N-event (default 500000) v0 zstd session and of the v4
#      session holding the same turns (bench/gensession -generation 4: the streamed text embedded in the
#      assistant messages, so about a quarter of the events and the same text);
#   2. appends: `dshfs append` of the same 200 turns (in the append syntax, flushed once) to each session.
# Each is run RUNS times (default 5) after one warm-up, alternating v0 and v4; the medians and the ratio
# v4 / v0 are printed (below 1.00: v4 is faster).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-500000}
RUNS=${RUNS:-5}
WORK=${BENCH_DIR:-${TMPDIR:-/tmp}/dshfs-bench}
mkdir -p "$WORK"
. bench/common.sh
go build -o "$WORK/dshfs" ./cmd/dshfs
go build -o "$WORK/gensession" ./bench/gensession
V0="$WORK/v4-bench-v0-$N" V4="$WORK/v4-bench-v4-$N"
# a v0 turn is 46 events (35 of them streamed chunks) and the first one a request header more; a v4 turn 11
TURNS=$(( (N + 45) / 46 ))
[ -d "$V0" ] || "$WORK/gensession" -mode zstd -id bench "$V0" "$N"
[ -d "$V4" ] || "$WORK/gensession" -mode zstd -id bench -generation 4 "$V4" $(( TURNS * 11 + 2 ))
for r in "$V0" "$V4"; do
  f=$(find "$r" -name 'session*.zstd')
  echo "$(basename "$f"): $("$WORK/dshfs" cat --view events "$r" bench | wc -l) events, $(stat -c %s "$f") bytes compressed"
done

pair() { # pair LABEL CMD_V0... -- CMD_V4...: alternating runs, medians and the ratio
  local label=$1; shift
  local a=() b=()
  while [ "$1" != -- ]; do a+=("$1"); shift; done
  shift
  measure "${a[@]}" >/dev/null; measure "$@" >/dev/null
  local x=() y=() i
  for i in $(seq "$RUNS"); do x+=("$(measure "${a[@]}")"); y+=("$(measure "$@")"); done
  local t0 t4
  t0=$(col 1 "${x[@]}"); t4=$(col 1 "${y[@]}")
  printf '%-28s v0 %ss (peak %s MiB), v4 %ss (peak %s MiB), v4/v0 %s\n' "$label" "$t0" $(( $(col 2 "${x[@]}") / 1024 )) \
    "$t4" $(( $(col 2 "${y[@]}") / 1024 )) "$(awk -v a="$t4" -v b="$t0" 'BEGIN{printf "%.2f", a/b}')"
}
pair "cold cat --view events" "$WORK/dshfs" cat --view events "$V0" bench -- "$WORK/dshfs" cat --view events "$V4" bench

# appends: the next 200 turns of each session, written once by gensession into a scratch copy and read back
# as lines; every run appends them to a fresh copy of the session
lines() { # lines ROOT GEN: the 200 turns after the session's end, in the append syntax
  local scratch="$WORK/v4-bench-lines-$2"
  rm -rf "$scratch"; cp -a "$1" "$scratch"
  local before; before=$("$WORK/dshfs" cat --view events "$scratch" bench | wc -l)
  "$WORK/gensession" -mode zstd -id bench -append "$scratch" 200
  "$WORK/dshfs" cat --view events "$scratch" bench | tail -n +$((before + 1)) | sed -E 's/"seq":[0-9]+,"time":[0-9]+,//'
}
lines "$V0" 0 > "$WORK/v4-bench-append-v0.jsonl"
V4LINES="$WORK/v4-bench-append-v4.jsonl"
# gensession -append writes v0 turns; the v4 twin of those turns is the tail of a v4 session 200 turns longer
[ -d "$V4-plus" ] || "$WORK/gensession" -mode zstd -id bench -generation 4 "$V4-plus" $(( (TURNS + 200) * 11 + 2 ))
"$WORK/dshfs" cat --view events "$V4-plus" bench | tail -n +$(( $("$WORK/dshfs" cat --view events "$V4" bench | wc -l) + 1 )) |
  sed -E 's/"seq":[0-9]+,"time":[0-9]+,//' > "$V4LINES"
echo "append: $(wc -l < "$WORK/v4-bench-append-v0.jsonl") v0 lines, $(wc -l < "$V4LINES") v4 lines (200 turns each)"
fresh() { rm -rf "$2"; cp -a "$1" "$2"; }
appendrun() { fresh "$1" "$WORK/v4-bench-target"; "$WORK/dshfs" append "$WORK/v4-bench-target" bench "$2"; }
export -f fresh appendrun
export WORK
pair "append 200 turns + flush" bash -c 'appendrun "$0" "$1"' "$V0" "$WORK/v4-bench-append-v0.jsonl" -- \
  bash -c 'appendrun "$0" "$1"' "$V4" "$V4LINES"
