#!/usr/bin/env bash
# bench/floor.sh — what a repeated grep -l over N small files costs through FUSE on this machine without
# dshfs: bench/fusefloor serves N files of SIZE bytes (defaults: the 10k-session store of bench/mount.sh,
# whose events.jsonl average about 12 KB) from memory, with every open kept in the page cache; a repeated
# grep -l PATTERN MNT/sessions/*/events.jsonl over it (median of RUNS, after one warm-up run) is set against
# the same over the same files on local disk, and against fusefloor -noopen (OPEN and FLUSH answered with
# ENOSYS: the kernel then sends no OPEN, RELEASE or FLUSH at all). The first figure is the floor of
# bench/mount.sh's "grep -l, repeated" row for any file system that answers OPEN.
# Env: N SIZE RUNS BENCH_DIR. Needs root or fuse3 (fusermount3).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-10000}
SIZE=${SIZE:-12000}
RUNS=${RUNS:-5}
WORK=${BENCH_DIR:-${TMPDIR:-/tmp}/dshfs-bench}
mkdir -p "$WORK"
. bench/common.sh
go build -o "$WORK/fusefloor" ./bench/fusefloor

# the same files on disk, copied out of a fusefloor mount once (and cached under $WORK)
DISK="$WORK/floor-$N-$SIZE"
if [ ! -f "$DISK/.complete" ]; then
  rm -rf "$DISK"; mkdir -p "$DISK/sessions"
  MNT=$(mktemp -d)
  "$WORK/fusefloor" -n "$N" -size "$SIZE" "$MNT" & pid=$!
  until mountpoint -q "$MNT"; do sleep 0.05; done
  (cd "$MNT" && cp -r sessions/. "$DISK/sessions/")
  kill -TERM "$pid"; wait "$pid" || true; rmdir "$MNT"
  touch "$DISK/.complete"
fi

# repeated ROOT: median seconds of RUNS grep -l runs over ROOT/sessions/*/events.jsonl after one warm-up
repeated() {
  local root=$1 i s e times=()
  grep -l "zzz-no-match" "$root"/sessions/*/events.jsonl >/dev/null || true
  for i in $(seq "$RUNS"); do
    s=$(date +%s%N)
    grep -l "zzz-no-match" "$root"/sessions/*/events.jsonl >/dev/null || true
    e=$(date +%s%N)
    times+=("$(awk -v a="$s" -v b="$e" 'BEGIN{printf "%.3f", (b-a)/1e9}')")
  done
  printf '%s\n' "${times[@]}" | median
}

# floor [-noopen]: the repeated grep over a fusefloor mount
floor() {
  local MNT pid t
  MNT=$(mktemp -d)
  "$WORK/fusefloor" -n "$N" -size "$SIZE" "$@" "$MNT" & pid=$!
  until mountpoint -q "$MNT"; do sleep 0.05; done
  t=$(repeated "$MNT")
  kill -TERM "$pid"; wait "$pid" || true; rmdir "$MNT"
  echo "$t"
}

disk=$(repeated "$DISK")
plain=$(floor)
noopen=$(floor -noopen)
echo "== grep -l over $N files of $SIZE bytes, repeated (median of $RUNS after a warm-up)"
printf '%-52s %8s s  %6sx disk\n' "local disk" "$disk" "1.00"
printf '%-52s %8s s  %6sx disk\n' "fusefloor (OPEN + RELEASE per file)" "$plain" "$(awk -v a="$plain" -v b="$disk" 'BEGIN{printf "%.2f", a/b}')"
printf '%-52s %8s s  %6sx disk\n' "fusefloor -noopen (no request per file)" "$noopen" "$(awk -v a="$noopen" -v b="$disk" 'BEGIN{printf "%.2f", a/b}')"
