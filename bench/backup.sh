#!/usr/bin/env bash
# bench/backup.sh — `rsync -a MNT/store/ DEST/` (the mount's frozen mirror of the artifacts) vs `rsync -a STORE/
# DEST/` (the store directory itself) on a SESSIONS-session zstd store (default 10000 sessions of at least
# PER=50 events, generated once with bench/gensession and cached under $BENCH_DIR): the first copy into an
# empty DEST and a rerun with nothing changed, medians of RUNS (default 3), with the ratios. Also `dshfs
# backup` through the mount and `dshfs verify` of its result, once. Not run by CI.
set -euo pipefail
cd "$(dirname "$0")/.."
SESSIONS=${SESSIONS:-10000}
PER=${PER:-50}
RUNS=${RUNS:-3}
WORK=${BENCH_DIR:-${TMPDIR:-/tmp}/dshfs-bench}
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
. bench/common.sh
bench_setup
now() { date +%s%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.4f\n", (b-a)/1e9}'; }
timeit() { local s; s=$(now); "$@" >/dev/null; secs "$s" "$(now)"; }
many_sessions "$SESSIONS" "$PER"
MNT="$WORK/backup-mnt"
mkdir -p "$MNT"
"$WORK/dshfs" mount "$MANY" "$MNT" 2>"$WORK/backup-mount.log" &
MPID=$!
trap 'kill -TERM $MPID 2>/dev/null; wait $MPID 2>/dev/null || true' EXIT
while ! awk -v m="$MNT" '$2 == m {f=1} END {exit !f}' /proc/mounts; do sleep 0.05; done
pair() { # pair SRC: "first rerun" seconds of rsync -a SRC/ into a fresh DEST
  local dest="$WORK/backup-dest" first rerun
  rm -rf "$dest"
  first=$(timeit rsync -a "$1/" "$dest/")
  rerun=$(timeit rsync -a "$1/" "$dest/")
  echo "$first $rerun"
}
m=(); s=()
for _ in $(seq "$RUNS"); do m+=("$(pair "$MNT/store")"); s+=("$(pair "$MANY")"); done
mf=$(col 1 "${m[@]}"); mr=$(col 2 "${m[@]}"); sf=$(col 1 "${s[@]}"); sr=$(col 2 "${s[@]}")
echo "store: $SESSIONS sessions, $(du -sh --exclude=.complete "$MANY" | cut -f1); medians of $RUNS"
printf 'rsync -a MNT/store/  first %ss, rerun %ss\n' "$mf" "$mr"
printf 'rsync -a STORE/      first %ss, rerun %ss\n' "$sf" "$sr"
awk -v a="$mf" -v b="$sf" -v c="$mr" -v d="$sr" 'BEGIN{printf "ratio (mirror / store): first %.2fx, rerun %.2fx\n", a/b, c/d}'
rm -rf "$WORK/backup-b"
printf 'dshfs backup (through the mount): %ss\n' "$(timeit "$WORK/dshfs" backup "$MANY" "$WORK/backup-b")"
printf 'dshfs verify: %ss\n' "$(timeit "$WORK/dshfs" verify "$WORK/backup-b")"
rm -rf "$WORK/backup-b" "$WORK/backup-dest"
