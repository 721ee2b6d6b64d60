#!/usr/bin/env bash
# bench/append.sh [N] — the live writer's append rate (docs/performance.md): N events (default 100000) written to
# MNT/sessions/<id>/append in chunks of 1,000 lines (`cat chunk >> append`), each followed by
# `echo flush > ctl`, into
#   - a fresh session, and
#   - a session already holding BASE events (default 500000), to show the rate does not depend on length,
# against the harness's own Session.append + flush every 1,000 events on the same N events in the same run
# (../shared/interop/appendrate.mjs). MODE=zstd (default) or raw; RUNS (default 3) runs of each, medians.
# The events are a bench/gensession session's own (stored seqs and times kept), so both writers append
# exactly the same bytes. MIXES (default "20 2 real") are the event mixes measured: a number is
# gensession's -chunks (20 streams 35 text chunks a turn: three quarters of the events are chunks; 2 streams
# 3: a fifth are chunks, a third messages, tool calls and results); "real" is the turns the harness wrote in
# ../shared/fixtures/golden/upstream replayed round-robin by bench/replayturns (reasoning and tool-call
# deltas, block brackets, inbox splices, titles, request headers, hooks, approvals, as agents write them).
# Every round measures every mix. With BASE_REV (a revision), that
# revision's build is measured beside the work tree's in every round too. Not run by CI.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-100000}
BASE=${BASE:-500000}
RUNS=${RUNS:-3}
MODE=${MODE:-zstd}
MIXES=${MIXES:-20 2 real}
TOP=${BENCH_DIR:-${TMPDIR:-/tmp}/dshfs-bench}/append-$MODE
WORK=$TOP
mkdir -p "$WORK"
. bench/common.sh
bench_setup appendrate.mjs
BIN=$TOP # dshfs, gensession, replayturns and the driver, shared by the mixes
go build -o "$BIN/replayturns" ./bench/replayturns
BASE=${BASE_REV:-} bench_base # bench_base reads a revision from BASE, which here is a length
compression=zstd; gmode=zstd
if [ "$MODE" = raw ]; then compression=none; gmode=none; fi

# mix_dir K: the working directory of the mix of K chunks a first step (the default mix keeps the one it
# always had, with its cached streams and stores)
mix_dir() { case $1 in 20) echo "$TOP" ;; real) echo "$TOP-real" ;; *) echo "$TOP-chunks$1" ;; esac; }
# mix_name K: how the output names mix K
mix_name() { if [ "$1" = real ]; then echo "real turns replayed"; else echo "-chunks $1"; fi; }

# prepare_mix K: the event stream of mix K, its chunks of 1,000 lines and the long session's store, in
# mix_dir K
prepare_mix() {
  local k=$1 base
  WORK=$(mix_dir "$k")
  mkdir -p "$WORK"
  # the event stream: one generated session of BASE+N events
  if [ "$k" = real ]; then
    "$BIN/replayturns" ../shared/fixtures/golden/upstream $((BASE + N)) > "$WORK/all.jsonl"
  elif [ ! -s "$WORK/all.jsonl" ]; then
    rm -rf "$WORK/src"
    "$BIN/gensession" -mode "$gmode" -chunks "$k" -id src "$WORK/src" $((BASE + N))
    "$BIN/dshfs" cat --view events "$WORK/src" src > "$WORK/all.jsonl"
  fi
  # the long session ends at the last turn/end within its first BASE events: a writer continues a balanced
  # session (one ending inside a turn must be resumed first)
  base=$(head -n "$BASE" "$WORK/all.jsonl" | grep -n '^{"type":"turn/end"' | tail -n 1 | cut -d: -f1)
  echo "$base" > "$WORK/base"
  rm -rf "$WORK/chunks" && mkdir -p "$WORK/chunks/fresh" "$WORK/chunks/long"
  head -n "$N" "$WORK/all.jsonl" > "$WORK/fresh.jsonl"
  head -n "$base" "$WORK/all.jsonl" > "$WORK/base.jsonl"
  tail -n +"$((base + 1))" "$WORK/all.jsonl" | head -n "$N" > "$WORK/long.jsonl"
  split -l 1000 -a 4 "$WORK/fresh.jsonl" "$WORK/chunks/fresh/c"
  split -l 1000 -a 4 "$WORK/long.jsonl" "$WORK/chunks/long/c"
  printf '[writer]\ncompression = "%s"\n' "$compression" > "$WORK/dshfs.toml"
  # the long session's store, written once: its events through the CLI writer
  if [ ! -d "$WORK/long-store" ] || [ "$(cat "$WORK/long-store.base" 2>/dev/null)" != "$base" ]; then
    rm -rf "$WORK/long-store"; echo "$base" > "$WORK/long-store.base"
    "$BIN/dshfs" create --config "$WORK/dshfs.toml" --cwd /srv/bench "$WORK/long-store" s >/dev/null
    "$BIN/dshfs" append --config "$WORK/dshfs.toml" "$WORK/long-store" s "$WORK/base.jsonl" >/dev/null
  fi
  echo "mix $(mix_name "$k"): $(grep -c '^{"type":"assistant/chunk"' "$WORK/fresh.jsonl" || true) of the $N events appended are assistant/chunk," \
    "$(grep -cE '^\{"type":"(user/message|assistant/message|tool/call|tool/result)"' "$WORK/fresh.jsonl" || true) messages, tool calls and results"
}
for k in $MIXES; do prepare_mix "$k"; done

# The driver writes each 1,000-line chunk with one write(2) to append and then "flush" to ctl, as
# `cat chunk >> append; echo flush > ctl` does, without a process spawn per chunk (cat's fork+exec costs
# ~5 ms here, which would measure the shell rather than the filesystem). The first chunk opens the session
# (a cold session is read and validated once); the rate is timed over the remaining chunks, and the open is
# reported on its own.
cat > "$BIN/driver.py" <<'PY'
import os, sys, time
sess, chunks = sys.argv[1], sorted(os.listdir(sys.argv[2]))
def put(path, data):
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
def chunk(name):
    with open(os.path.join(sys.argv[2], name), 'rb') as f:
        return f.read()
t0 = time.monotonic()
put(sess + '/append', chunk(chunks[0])); put(sess + '/ctl', b'flush\n')
t1 = time.monotonic()
n = 0
for c in chunks[1:]:
    data = chunk(c)
    put(sess + '/append', data); put(sess + '/ctl', b'flush\n')
    n += data.count(b'\n')
t2 = time.monotonic()
print(int(n / (t2 - t1)), round(t1 - t0, 3))
PY

# one dshfs run: mount STORE with DSHFS (default the work tree's build), append every chunk of KIND of the
# mix in WORK with a flush after each; prints "events/s open_s"
dshfs_run() {
  local kind=$1 store=$2 bin=${3:-$BIN/dshfs} mnt="$WORK/mnt"
  mkdir -p "$mnt" "$store"
  "$bin" mount --config "$WORK/dshfs.toml" "$store" "$mnt" 2>"$WORK/mount.log" &
  local pid=$!
  until [ -d "$mnt/sessions" ]; do sleep 0.05; done
  [ -d "$mnt/sessions/s" ] || echo "create s cwd=/srv/bench" > "$mnt/ctl"
  python3 "$BIN/driver.py" "$mnt/sessions/s" "$WORK/chunks/$kind"
  kill -TERM "$pid"; wait "$pid"
}

# The three measurements of every mix alternate, one of each per round, so that a slow spell of a shared
# machine falls on all of them alike.
declare -A harness_runs=() fresh_runs=() long_runs=() base_fresh=() base_long=()
for i in $(seq "$RUNS"); do
  for k in $MIXES; do
    WORK=$(mix_dir "$k")
    rm -rf "$WORK/h-store"
    harness_runs[$k]+="$("$NODE22" "$CACHE/appendrate.mjs" "$WORK/fresh.jsonl" "$WORK/h-store" "$MODE" --every 1000 | sed 's/.*"eventsPerSec":\([0-9]*\).*/\1/')"$'\n'
    rm -rf "$WORK/d-store"
    fresh_runs[$k]+="$(dshfs_run fresh "$WORK/d-store")"$'\n'
    rm -rf "$WORK/l-store" && cp -a "$WORK/long-store" "$WORK/l-store" && sync
    long_runs[$k]+="$(dshfs_run long "$WORK/l-store")"$'\n'
    if [ -n "$BASEBIN" ]; then
      rm -rf "$WORK/d-store"
      base_fresh[$k]+="$(dshfs_run fresh "$WORK/d-store" "$BASEBIN")"$'\n'
      rm -rf "$WORK/l-store" && cp -a "$WORK/long-store" "$WORK/l-store" && sync
      base_long[$k]+="$(dshfs_run long "$WORK/l-store" "$BASEBIN")"$'\n'
    fi
  done
done
echo "mode $MODE, $N events, flush every 1000, medians of $RUNS"
for k in $MIXES; do
  WORK=$(mix_dir "$k")
  harness=$(printf '%s' "${harness_runs[$k]}" | median)
  fresh=$(printf "%s" "${fresh_runs[$k]}" | cut -d' ' -f1 | median)
  long=$(printf "%s" "${long_runs[$k]}" | cut -d' ' -f1 | median)
  long_open=$(printf "%s" "${long_runs[$k]}" | cut -d' ' -f2 | median)
  echo "-- mix $(mix_name "$k")"
  echo "harness Session.append + flush (fresh session): $harness events/s"
  echo "dshfs append + ctl flush, fresh session:         $fresh events/s ($(awk -v a="$fresh" -v b="$harness" 'BEGIN{printf "%.2f", a/b}')x the harness)"
  echo "dshfs append + ctl flush, after $(cat "$WORK/base") events:   $long events/s ($(awk -v a="$long" -v b="$harness" 'BEGIN{printf "%.2f", a/b}')x the harness); opening it took ${long_open}s"
  if [ -n "$BASEBIN" ]; then
    bf=$(printf "%s" "${base_fresh[$k]}" | cut -d' ' -f1 | median)
    bl=$(printf "%s" "${base_long[$k]}" | cut -d' ' -f1 | median)
    echo "base dshfs, fresh session / after $(cat "$WORK/base") events: $bf / $bl events/s ($(awk -v a="$bf" -v b="$harness" 'BEGIN{printf "%.2f", a/b}')x / $(awk -v a="$bl" -v b="$harness" 'BEGIN{printf "%.2f", a/b}')x the harness)"
  fi
done
