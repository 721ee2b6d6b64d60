#!/usr/bin/env bash
# bench/append.sh [N] — the live writer's append rate (docs/performance.md): N events (default 100000) written to
# MNT/sessions/<id>/append in chunks of 1,000 lines (`cat chunk >> append`), each followed by
# `echo flush > ctl`, into
#   - a fresh session, and
#   - a session already holding BASE events (default 500000), to show the rate does not depend on length,
# against the harness's own Session.append + flush every 1,000 events on the same N events in the same run
# (../shared/interop/appendrate.mjs). MODE=zstd (default) or raw; RUNS (default 3) runs of each, medians.
# The events are a bench/gensession session's own (stored seqs and times kept), so both writers append
# exactly the same bytes. Not run by CI.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-100000}
BASE=${BASE:-500000}
RUNS=${RUNS:-3}
MODE=${MODE:-zstd}
WORK=${BENCH_DIR:-${TMPDIR:-/tmp}/dshfs-bench}/append-$MODE
mkdir -p "$WORK"
. bench/common.sh
bench_setup appendrate.mjs
compression=zstd; gmode=zstd
if [ "$MODE" = raw ]; then compression=none; gmode=none; fi

# the event stream: one generated session of BASE+N events
if [ ! -s "$WORK/all.jsonl" ]; then
  rm -rf "$WORK/src"
  "$WORK/gensession" -mode "$gmode" -id src "$WORK/src" $((BASE + N))
  "$WORK/dshfs" cat --view events "$WORK/src" src > "$WORK/all.jsonl"
fi
# the long session ends at the last turn/end within its first BASE events: a writer continues a balanced
# session (one ending inside a turn must be resumed first)
base=$(head -n "$BASE" "$WORK/all.jsonl" | grep -n '^{"type":"turn/end"' | tail -n 1 | cut -d: -f1)
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
  "$WORK/dshfs" create --config "$WORK/dshfs.toml" --cwd /srv/bench "$WORK/long-store" s >/dev/null
  "$WORK/dshfs" append --config "$WORK/dshfs.toml" "$WORK/long-store" s "$WORK/base.jsonl" >/dev/null
fi


# The driver writes each 1,000-line chunk with one write(2) to append and then "flush" to ctl, as
# `cat chunk >> append; echo flush > ctl` does, without a process spawn per chunk (cat's fork+exec costs
# ~5 ms here, which would measure the shell rather than the filesystem). The first chunk opens the session
# (a cold session is read and validated once); the rate is timed over the remaining chunks, and the open is
# reported on its own.
cat > "$WORK/driver.py" <<'PY'
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

# one dshfs run: mount STORE, append every chunk of KIND with a flush after each; prints "events/s open_s"
dshfs_run() {
  local kind=$1 store=$2 mnt="$WORK/mnt"
  mkdir -p "$mnt" "$store"
  "$WORK/dshfs" mount --config "$WORK/dshfs.toml" "$store" "$mnt" 2>"$WORK/mount.log" &
  local pid=$!
  until [ -d "$mnt/sessions" ]; do sleep 0.05; done
  [ -d "$mnt/sessions/s" ] || echo "create s cwd=/srv/bench" > "$mnt/ctl"
  python3 "$WORK/driver.py" "$mnt/sessions/s" "$WORK/chunks/$kind"
  kill -TERM "$pid"; wait "$pid"
}

# The three measurements alternate, one of each per round, so that a slow spell of a shared machine falls on
# all of them alike.
harness_runs=; fresh_runs=; long_runs=
for i in $(seq "$RUNS"); do
  rm -rf "$WORK/h-store"
  harness_runs+="$("$NODE22" "$CACHE/appendrate.mjs" "$WORK/fresh.jsonl" "$WORK/h-store" "$MODE" --every 1000 | sed 's/.*"eventsPerSec":\([0-9]*\).*/\1/')"$'\n'
  rm -rf "$WORK/d-store"
  fresh_runs+="$(dshfs_run fresh "$WORK/d-store")"$'\n'
  rm -rf "$WORK/l-store" && cp -a "$WORK/long-store" "$WORK/l-store" && sync
  long_runs+="$(dshfs_run long "$WORK/l-store")"$'\n'
done
harness=$(printf '%s' "$harness_runs" | median)
fresh=$(printf "%s" "$fresh_runs" | cut -d' ' -f1 | median)
long=$(printf "%s" "$long_runs" | cut -d' ' -f1 | median)
long_open=$(printf "%s" "$long_runs" | cut -d' ' -f2 | median)
echo "mode $MODE, $N events, flush every 1000, medians of $RUNS"
echo "harness Session.append + flush (fresh session): $harness events/s"
echo "dshfs append + ctl flush, fresh session:         $fresh events/s ($(awk -v a="$fresh" -v b="$harness" 'BEGIN{printf "%.2f", a/b}')x the harness)"
echo "dshfs append + ctl flush, after $base events:   $long events/s ($(awk -v a="$long" -v b="$harness" 'BEGIN{printf "%.2f", a/b}')x the harness); opening it took ${long_open}s"
