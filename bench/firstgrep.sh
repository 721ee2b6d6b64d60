#!/usr/bin/env bash
# bench/firstgrep.sh — the first grep over a fresh mount, against both of its baselines in the same run:
#   mount:  grep -l PATTERN MNT/sessions/*/events.jsonl on a fresh `dshfs mount` of a SESSIONS-session zstd
#           store (default 10000 sessions of at least PER=50 events — whole turns, so 93 — as bench/mount.sh
#           makes them), with an empty [cache] dir;
#   disk:   the same grep over the decompressed artifacts on disk (MIRROR/<name>/events.jsonl);
#   unzstd: zstd -d of every session.jsonl.zstd of the store to /dev/null (one process).
# Every run starts with the page, dentry and inode caches dropped (this must run as root), and the three
# (four with BASE: the BASE revision's build too) alternate, RUNS rounds; the medians are reported. The
# floor is unzstd + disk: reading and decompressing every artifact, then searching the plain bytes. The
# target is the larger of 3x disk and 1.25x the floor. The mount's CPU time (user + system, from
# /proc/PID/stat) during the grep is reported too: on a shared machine it moves less than the wall time.
# Then bench/walkcpu (the mount's read path of every events.jsonl without FUSE, one P, the page cache warm)
# gives each build's CPU time and allocation for the same work, RUNS alternating runs.
# With GEN=4 the store holds v4 sessions of the same turns (PER then defaults to 24: two v4 turns, as the v0
# default is two v0 turns).
# Env: SESSIONS PER GEN RUNS PATTERN BENCH_DIR BASE (a revision to build and measure beside the work tree).
set -euo pipefail
cd "$(dirname "$0")/.."
SESSIONS=${SESSIONS:-10000}
GEN=${GEN:-0}
if [ "$GEN" = 4 ]; then PER=${PER:-24}; else PER=${PER:-50}; fi
RUNS=${RUNS:-5}
PATTERN=${PATTERN:-FAIL: TestC}
WORK=${BENCH_DIR:-${TMPDIR:-/tmp}/dshfs-bench}
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
if [ "$(id -u)" != 0 ]; then
  echo "firstgrep.sh: the cold runs drop the page cache; run as root" >&2
  exit 2
fi
. bench/common.sh
go build -o "$WORK/dshfs" ./cmd/dshfs
go build -o "$WORK/gensession" ./bench/gensession
go build -o "$WORK/walkcpu" ./bench/walkcpu
bench_base
if [ -n "$BASEBIN" ]; then
  if [ -d "$WORK/base-src/bench/walkcpu" ]; then
    (cd "$WORK/base-src" && go build -o "$WORK/walkcpu-base" ./bench/walkcpu)
  else # a base older than walkcpu: the same program over the base's packages
    mkdir -p "$WORK/base-src/bench/walkcpu"
    cp bench/walkcpu/main.go "$WORK/base-src/bench/walkcpu/"
    (cd "$WORK/base-src" && go build -o "$WORK/walkcpu-base" ./bench/walkcpu)
  fi
fi
XDG="$WORK/xdg"
MNT="$WORK/mnt-firstgrep"
trap unmount_all EXIT

many_sessions "$SESSIONS" "$PER" "$GEN"
MIRROR="$MANY.mirror" # for v0, the same mirror as bench/mount.sh's
if [ ! -f "$MIRROR/.complete" ]; then
  echo "== decompressing every artifact into $MIRROR (once; cached)"
  rm -rf "$MIRROR"
  mkdir -p "$MIRROR"
  export MIRROR
  find "$MANY" -name 'session*.jsonl.zstd' -print0 | xargs -0 -P "$(nproc)" -n 200 sh -c \
    'for f do d="$MIRROR/$(basename "$(dirname "$f")")"; mkdir -p "$d"; zstd -d -q -c "$f" >"$d/events.jsonl" || exit 255; done' sh
  touch "$MIRROR/.complete"
fi
NSESS=$(find "$MANY" -name 'session*.jsonl.zstd' | wc -l)

secs() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.3f\n", (b-a)/1e9}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.2fx", a/b}'; }
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
cold() { sync; echo 3 >/proc/sys/vm/drop_caches; }
grep_over() { bash -c 'grep -l -- "$1" "$2"/*/events.jsonl' grep "$PATTERN" "$1" >/dev/null || [ $? -eq 1 ]; }
# timed CMD...: the wall seconds of one run
timed() {
  local s
  s=$(date +%s%N)
  "$@"
  secs "$s" "$(date +%s%N)"
}
# mount_run BIN: a fresh mount of the store with an empty index, the first grep timed; prints
# "<wall seconds> <mount CPU seconds>"
mount_run() {
  local t0 w
  rm -rf "$XDG/dshfs"
  cold
  mount_with "$1" "$MANY" "$MNT"
  t0=$(ticks "$MPID")
  w=$(timed grep_over "$MNT/sessions")
  echo "$w $(awk -v a="$t0" -v b="$(ticks "$MPID")" -v hz="$(getconf CLK_TCK)" 'BEGIN{printf "%.2f", (b-a)/hz}')"
  unmount_store "$MNT"
}
unzstd_all() { find "$MANY" -name 'session*.jsonl.zstd' -print0 | xargs -0 zstd -d -q -c >/dev/null; }

echo "first grep -l over $NSESS v$GEN sessions: RUNS=$RUNS, $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
m=() mc=() b=() bc=() d=() z=()
for i in $(seq "$RUNS"); do
  read -r w c < <(mount_run "$WORK/dshfs"); m+=("$w"); mc+=("$c")
  if [ -n "$BASEBIN" ]; then read -r w c < <(mount_run "$BASEBIN"); b+=("$w"); bc+=("$c"); fi
  cold; d+=("$(timed grep_over "$MIRROR")")
  cold; z+=("$(timed unzstd_all)")
  echo "  round $i: mount ${m[-1]} s (CPU ${mc[-1]} s)${BASEBIN:+, base ${b[-1]} s (CPU ${bc[-1]} s)}, disk ${d[-1]} s, unzstd ${z[-1]} s"
done
mm=$(printf '%s\n' "${m[@]}" | median); mcm=$(printf '%s\n' "${mc[@]}" | median)
dm=$(printf '%s\n' "${d[@]}" | median); zm=$(printf '%s\n' "${z[@]}" | median)
floor=$(awk -v a="$dm" -v b="$zm" 'BEGIN{printf "%.3f", a+b}')
target=$(awk -v d="$dm" -v f="$floor" 'BEGIN{t=3*d; if (1.25*f > t) t=1.25*f; printf "%.3f", t}')
echo
echo "medians of $RUNS, every run cold (load average now $(cut -d' ' -f1-3 /proc/loadavg)):"
echo "  disk grep (the decompressed artifacts):   $dm s"
echo "  zstd -d of every artifact:                $zm s"
echo "  floor (zstd -d + disk grep):              $floor s"
echo "  target (max of 3x disk, 1.25x floor):     $target s"
echo "  dshfs first grep:                         $mm s (mount CPU $mcm s): $(ratio "$mm" "$dm") disk, $(ratio "$mm" "$floor") the floor"
if [ -n "$BASEBIN" ]; then
  bm=$(printf '%s\n' "${b[@]}" | median); bcm=$(printf '%s\n' "${bc[@]}" | median)
  echo "  base dshfs first grep:                    $bm s (mount CPU $bcm s): $(ratio "$bm" "$dm") disk, $(ratio "$bm" "$floor") the floor"
fi

echo
echo "walkcpu: every events.jsonl through the mount's read path without FUSE, one P, page cache warm (RUNS=$RUNS):"
wc=() wa=() bwc=() bwa=()
for i in $(seq "$RUNS"); do
  rm -rf "$WORK/walkcpu-index"
  line=$(GOMAXPROCS=1 "$WORK/walkcpu" "$MANY" "$WORK/walkcpu-index"); echo "  dshfs: $line"
  wc+=("$(echo "$line" | sed -E 's/.*CPU ([0-9.]+) s.*/\1/')"); wa+=("$(echo "$line" | sed -E 's/.*allocated ([0-9]+) MB.*/\1/')")
  if [ -n "$BASEBIN" ]; then
    rm -rf "$WORK/walkcpu-index"
    line=$(GOMAXPROCS=1 "$WORK/walkcpu-base" "$MANY" "$WORK/walkcpu-index"); echo "  base:  $line"
    bwc+=("$(echo "$line" | sed -E 's/.*CPU ([0-9.]+) s.*/\1/')"); bwa+=("$(echo "$line" | sed -E 's/.*allocated ([0-9]+) MB.*/\1/')")
  fi
done
rm -rf "$WORK/walkcpu-index"
echo "  medians: dshfs CPU $(printf '%s\n' "${wc[@]}" | median) s, $(printf '%s\n' "${wa[@]}" | median) MB allocated${BASEBIN:+; base CPU $(printf '%s\n' "${bwc[@]}" | median) s, $(printf '%s\n' "${bwa[@]}" | median) MB allocated}"
