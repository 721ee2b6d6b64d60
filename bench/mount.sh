#!/usr/bin/env bash
# bench/mount.sh — the mount's performance figures (docs/performance.md), each as a ratio against a baseline
# measured in this same run of the script:
#   1. cat MNT/sessions/bench/events.jsonl > /dev/null of a BIG-event (default 500000) session, cold (the
#      first read after a fresh mount, COLD_RUNS mounts) and warm (RUNS repeated reads), vs cat of the same
#      bytes copied to tmpfs (/dev/shm): throughput and ratios.
#   2. a SESSIONS-session store (default 10000 sessions of at least PER=50 events — whole turns, so 93 —
#      generated once in parallel and cached under $BENCH_DIR): ls -l MNT/sessions/ and grep -rl PATTERN
#      MNT/sessions/*/events.jsonl vs the same over a mirror tree of the decompressed artifacts on disk (zstd
#      -d of every session.jsonl.zstd into MIRROR/<name>/events.jsonl). "first" = a fresh mount with an empty
#      [cache] dir (the mounts here use $BENCH_DIR/xdg as XDG_CACHE_HOME) and, when this runs as root, the
#      page caches dropped (the disk baseline's first run likewise); "repeated" = median of RUNS after it.
#      The repeated grep is also set against bench/fusefloor, a do-nothing FUSE server answering OPEN, serving
#      as many files of the same mean size (the floor of bench/floor.sh, measured beside it).
#      Listing time (dshfs ls, ls/ls -l over the mount, mount start-up) vs the harness's own list()
#      (inspect.mjs ROOT - list, Node 22 with the pinned packages).
#   3. grep -r PATTERN MNT/sessions/ over the whole mount (every view file; stopped after GREP_TIMEOUT
#      seconds), with the dshfs process's peak RSS (VmHWM from /proc/PID/status, sampled every 0.5 s), vs
#      grep -r of an rsync -a copy of the mount on local disk (made once and cached); and the mount's CPU
#      use while idle (the watcher) with SESSIONS sessions mounted.
#   4. latency from an external append (gensession -append, one whole turn) until tail -f on the mounted
#      events.jsonl prints the turn's last line: median of APPENDS appends, with tail's default 1 s poll and
#      with -s 0.1, on a one-session store and on the SESSIONS-session store.
# Every mount is served by a separate `dshfs mount` process; this script only reads it from outside.
# PATTERN (default "FAIL: TestC") matches nothing in the synthetic sessions, so grep reads every byte.
# Needs: fuse3 (fusermount3) unless run as root, zstd, jq, and the interop cache (installed on first use).
# Env: BIG SESSIONS PER RUNS COLD_RUNS APPENDS PATTERN GREP_TIMEOUT OP_TIMEOUT BENCH_DIR SHM_DIR
#      DSHFS_INTEROP_CACHE; SKIP="big many rss tail" (any subset) skips parts.
set -euo pipefail
cd "$(dirname "$0")/.."
BIG=${BIG:-500000}
SESSIONS=${SESSIONS:-10000}
PER=${PER:-50}
RUNS=${RUNS:-5}
COLD_RUNS=${COLD_RUNS:-3}
APPENDS=${APPENDS:-5}
PATTERN=${PATTERN:-FAIL: TestC}
GREP_TIMEOUT=${GREP_TIMEOUT:-1800}
OP_TIMEOUT=${OP_TIMEOUT:-600}
SKIP=${SKIP:-}
WORK=${BENCH_DIR:-${TMPDIR:-/tmp}/dshfs-bench}
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
SHM=${SHM_DIR:-/dev/shm/dshfs-bench-$$}
mkdir -p "$SHM"
if [ "$(stat -f -c %T "$SHM")" != tmpfs ]; then
  echo "mount.sh: $SHM is not on tmpfs ($(stat -f -c %T "$SHM")); set SHM_DIR to a tmpfs directory" >&2
  exit 2
fi
. bench/common.sh
bench_setup inspect.mjs
DSHFS="$WORK/dshfs"
GEN="$WORK/gensession"
skip() { [[ " $SKIP " == *" $1 "* ]]; }

# --- helpers -----------------------------------------------------------------------------------------------
now() { date +%s%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.4f\n", (b-a)/1e9}'; }
median() { sort -g | awk '{a[NR]=$1} END {if (NR) print a[int((NR+1)/2)]; else print "nan"}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{if (b+0 == 0 || a == "nan" || b == "nan") print "n/a"; else printf "%.2fx", a/b}'; }
mbps() { awk -v n="$1" -v s="$2" 'BEGIN{if (s+0 == 0) print "n/a"; else printf "%.0f MB/s", n/s/1e6}'; }
# timeit CMD...: wall seconds of one run, output discarded; exit status 1 (grep: no match) is not an error,
# anything else is reported on stderr and the time is still printed (marked with a trailing !).
timeit() {
  local s e rc=0
  s=$(now)
  timeout "$OP_TIMEOUT" "$@" >/dev/null || rc=$?
  e=$(now)
  if [ "$rc" -gt 1 ]; then echo "  warning: '$*' exited $rc" >&2; fi
  if [ "$rc" -eq 124 ]; then echo "  warning: '$*' timed out after ${OP_TIMEOUT}s" >&2; fi
  secs "$s" "$e"
}
runs() { # runs K CMD...: K timings, one per line
  local k=$1; shift
  for _ in $(seq "$k"); do timeit "$@"; done
}
loadavg() { cut -d' ' -f1-3 /proc/loadavg; }

SUMMARY=()
row() { SUMMARY+=("$(printf '%-52s| %-14s| %-14s| %s' "$1" "$2" "$3" "$4")"); }

# the mounts' index cache ([cache] dir defaults to $XDG_CACHE_HOME/dshfs): emptied for every "first" run
XDG="$WORK/xdg"
# mount_store ROOT MNT: mount_with, and the start-up seconds (launch until mounted) written to $WORK/.startup
mount_store() {
  local s
  s=$(now)
  mount_with "$DSHFS" "$1" "$2"
  secs "$s" "$(now)" >"$WORK/.startup"
}
TAILPIDS=()
cleanup() {
  for p in "${TAILPIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  unmount_all
  rm -rf "$SHM"
}
trap cleanup EXIT
hwm() { awk '/^VmHWM/ {print $2}' "/proc/$1/status"; } # KiB
rss() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; } # KiB
cputicks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
MNT="$WORK/mnt"

echo "dshfs mount benchmarks: BIG=$BIG SESSIONS=$SESSIONS PER=$PER RUNS=$RUNS COLD_RUNS=$COLD_RUNS APPENDS=$APPENDS"
echo "host: $(nproc) cores, $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo), tmpfs: $SHM, load average: $(loadavg)"
# steal: CPU time the hypervisor gave to other guests (the 9th field of /proc/stat's cpu line, in ticks): on
# a shared virtual machine it moves every figure here, so the summary reports it
steal_ticks() { awk '/^cpu / {print $9}' /proc/stat; }
STEAL0=$(steal_ticks)

# --- 1. cat throughput of a large session --------------------------------------------------------------------
if ! skip big; then
  ROOT="$WORK/load-$BIG" # shared with bench/load.sh and bench/surface.sh
  if [ ! -d "$ROOT" ]; then "$GEN" -mode zstd -id bench "$ROOT" "$BIG"; fi
  echo
  echo "== 1. cat of a $BIG-event session ($(find "$ROOT" -name session.jsonl.zstd -printf '%s') bytes compressed)"
  F="$MNT/sessions/bench/events.jsonl"
  cold=()
  for i in $(seq "$COLD_RUNS"); do
    cold_caches
    mount_store "$ROOT" "$MNT"
    cold+=("$(timeit cat "$F")")
    if [ "$i" -lt "$COLD_RUNS" ]; then unmount_store "$MNT"; fi
  done
  SIZE=$(stat -c %s "$F")
  cp "$F" "$SHM/events.jsonl"
  if ! cmp -s <("$DSHFS" cat --view events "$ROOT" bench) "$SHM/events.jsonl"; then
    echo "  WARNING: the mounted events.jsonl differs from dshfs cat --view events" >&2
  fi
  timeit cat "$F" >/dev/null
  warm=$(runs "$RUNS" cat "$F" | median)
  timeit cat "$SHM/events.jsonl" >/dev/null
  shm=$(runs "$RUNS" cat "$SHM/events.jsonl" | median)
  coldm=$(printf '%s\n' "${cold[@]}" | median)
  echo "  events.jsonl: $SIZE bytes"
  echo "  cold FUSE (first read after mount, $COLD_RUNS mounts): ${cold[*]} s -> median $coldm s, $(mbps "$SIZE" "$coldm")"
  echo "  warm FUSE (median of $RUNS): $warm s, $(mbps "$SIZE" "$warm")"
  echo "  tmpfs (median of $RUNS): $shm s, $(mbps "$SIZE" "$shm")"
  echo "  dshfs RSS after the reads: VmHWM $(( $(hwm "$MPID") / 1024 )) MiB, VmRSS $(( $(rss "$MPID") / 1024 )) MiB"
  row "cat events.jsonl ${BIG} ev, cold (MB/s)" "$(mbps "$SIZE" "$coldm")" "$(mbps "$SIZE" "$shm")" "$(ratio "$shm" "$coldm") of tmpfs"
  row "cat events.jsonl ${BIG} ev, warm (MB/s)" "$(mbps "$SIZE" "$warm")" "$(mbps "$SIZE" "$shm")" "$(ratio "$shm" "$warm") of tmpfs"
  unmount_store "$MNT"
  rm -f "$SHM/events.jsonl"
fi

# --- 2. the many-session store ---------------------------------------------------------------------------------
MANY="$WORK/many-$SESSIONS-$PER"
MIRROR="$WORK/many-$SESSIONS-$PER.mirror"
if ! skip many || ! skip rss || ! skip tail; then
  rm -rf "$MANY/--home-dev-bench--/tail-bench" # a leftover of an interrupted tail test
  if [ ! -f "$MANY/.complete" ]; then
    echo
    echo "== generating $SESSIONS sessions of >= $PER events into $MANY (once; cached)"
    rm -rf "$MANY"
    mkdir -p "$MANY"
    s=$(now)
    # one session first, so the parallel writers find the project directory in place
    "$GEN" -mode zstd -id s00000 "$MANY" "$PER"
    export GEN MANY PER
    seq -f 's%05g' 1 $((SESSIONS - 1)) | xargs -P "$(nproc)" -n 200 sh -c \
      'for id do "$GEN" -mode zstd -id "$id" "$MANY" "$PER" || exit 255; done' sh
    touch "$MANY/.complete"
    echo "  generated in $(secs "$s" "$(now)") s"
  fi
  if [ ! -f "$MIRROR/.complete" ]; then
    echo "== decompressing every artifact into $MIRROR (once; cached)"
    rm -rf "$MIRROR"
    mkdir -p "$MIRROR"
    export MIRROR
    find "$MANY" -name session.jsonl.zstd -print0 | xargs -0 -P "$(nproc)" -n 200 sh -c \
      'for f do d="$MIRROR/$(basename "$(dirname "$f")")"; mkdir -p "$d"; zstd -d -q -c "$f" >"$d/events.jsonl" || exit 255; done' sh
    touch "$MIRROR/.complete"
  fi
  NSESS=$(find "$MANY" -name session.jsonl.zstd | wc -l)
  echo "  store: $NSESS sessions, $(du -sb --exclude=.complete "$MANY" | cut -f1) bytes on disk; mirror: $(du -sb "$MIRROR" | cut -f1) bytes decompressed"
fi

if ! skip many; then
  echo
  echo "== 2. $NSESS sessions: listing and grep"
  # listing: the harness's list() vs dshfs ls (both a fresh process that reads every header)
  nl=$("$NODE22" "$CACHE/inspect.mjs" "$MANY" - list | wc -l)
  ol=$("$DSHFS" ls "$MANY" | wc -l)
  echo "  sessions listed: harness list() $nl, dshfs ls $ol"
  timeit "$DSHFS" ls "$MANY" >/dev/null
  dls=$(runs "$RUNS" "$DSHFS" ls "$MANY" | median)
  hlist=$(runs "$RUNS" "$NODE22" "$CACHE/inspect.mjs" "$MANY" - list | median)
  # Node start-up and package import alone, so the list() figure can be read with and without it
  hboot=$(runs "$RUNS" "$NODE22" "$CACHE/inspect.mjs" "$SHM" - list | median)
  echo "  harness list() (node inspect.mjs ROOT - list, median of $RUNS): $hlist s (of which $hboot s is start-up over an empty root)"
  echo "  dshfs ls ROOT (median of $RUNS): $dls s"

  # ls -l: a fresh mount on cold caches, the first ls -l, then RUNS more
  cold_caches
  mount_store "$MANY" "$MNT"
  startup=$(cat "$WORK/.startup")
  echo "  mount start-up (launch until mounted; includes the first listing): $startup s"
  lsl_cold=$(timeit ls -l "$MNT/sessions/")
  lsl_n=$(ls "$MNT/sessions/" | wc -l)
  lsl_warm=$(runs "$RUNS" ls -l "$MNT/sessions/" | median)
  ls_warm=$(runs "$RUNS" ls "$MNT/sessions/" | median)
  echo "  dshfs RSS after ls -l: VmHWM $(( $(hwm "$MPID") / 1024 )) MiB"
  unmount_store "$MNT"
  cold_caches
  lsl_disk_cold=$(timeit ls -l "$MIRROR/")
  lsl_disk=$(runs "$RUNS" ls -l "$MIRROR/" | median)
  ls_disk=$(runs "$RUNS" ls "$MIRROR/" | median)
  echo "  ls -l MNT/sessions/ ($lsl_n entries): cold $lsl_cold s, warm $lsl_warm s (median of $RUNS); ls (names only) warm $ls_warm s"
  echo "  ls -l MIRROR/ on disk: $lsl_disk s; ls: $ls_disk s"

  # grep -rl over every events.jsonl: a fresh mount on cold caches, the first grep, then RUNS more
  GREP_MNT=(bash -c 'grep -rl -- "$1" "$2"/*/events.jsonl' grep "$PATTERN" "$MNT/sessions")
  GREP_DISK=(bash -c 'grep -rl -- "$1" "$2"/*/events.jsonl' grep "$PATTERN" "$MIRROR")
  cold_caches
  mount_store "$MANY" "$MNT"
  grep_cold=$(timeit "${GREP_MNT[@]}")
  grep_warm=$(runs "$RUNS" "${GREP_MNT[@]}" | median)
  mbytes=$(find "$MNT/sessions/" -mindepth 2 -maxdepth 2 -name events.jsonl -printf '%s\n' | awk '{s+=$1} END {print s}')
  dbytes=$(find "$MIRROR/" -mindepth 2 -maxdepth 2 -name events.jsonl -printf '%s\n' | awk '{s+=$1} END {print s}')
  hits_m=$("${GREP_MNT[@]}" | wc -l || true)
  hits_d=$("${GREP_DISK[@]}" | wc -l || true)
  grep_hwm=$(( $(hwm "$MPID") / 1024 ))
  # the watcher with every session mounted: CPU while nothing reads the mount
  t0=$(cputicks "$MPID"); sleep 10; t1=$(cputicks "$MPID")
  idle=$(awk -v a="$t0" -v b="$t1" -v hz="$(getconf CLK_TCK)" 'BEGIN{printf "%.1f%%", (b-a)/hz/10*100}')
  unmount_store "$MNT"
  cold_caches
  grep_disk_cold=$(timeit "${GREP_DISK[@]}")
  grep_disk=$(runs "$RUNS" "${GREP_DISK[@]}" | median)
  # the floor beside it: bench/fusefloor (a do-nothing server answering OPEN) serving as many files of the
  # mount's mean events.jsonl size, the same repeated grep (median of RUNS after a warm-up)
  go build -o "$WORK/fusefloor" ./bench/fusefloor
  FLOOR_MNT=$(mktemp -d)
  "$WORK/fusefloor" -n "$NSESS" -size $((mbytes / NSESS)) "$FLOOR_MNT" & fpid=$!
  until mountpoint -q "$FLOOR_MNT"; do sleep 0.05; done
  GREP_FLOOR=(bash -c 'grep -rl -- "$1" "$2"/*/events.jsonl' grep "$PATTERN" "$FLOOR_MNT/sessions")
  timeit "${GREP_FLOOR[@]}" >/dev/null
  grep_floor=$(runs "$RUNS" "${GREP_FLOOR[@]}" | median)
  kill -TERM "$fpid"; wait "$fpid" || true; rmdir "$FLOOR_MNT"
  echo "  grep -rl '$PATTERN' */events.jsonl: mount first $grep_cold s, repeated $grep_warm s; disk first $grep_disk_cold s, repeated $grep_disk s; do-nothing FUSE server (fusefloor) repeated $grep_floor s; files matched: mount $hits_m, disk $hits_d"
  echo "  bytes searched: mount $mbytes (events.jsonl: rows expanded, no header), disk $dbytes (decompressed artifacts)"
  echo "  dshfs VmHWM after the grep -rl runs: $grep_hwm MiB; idle CPU with $NSESS sessions mounted: $idle of one core (10 s)"
  row "ls -l sessions/ ($NSESS), first (s)" "$lsl_cold" "$lsl_disk_cold" "$(ratio "$lsl_cold" "$lsl_disk_cold") disk time"
  row "ls -l sessions/ ($NSESS), repeated (s)" "$lsl_warm" "$lsl_disk" "$(ratio "$lsl_warm" "$lsl_disk") disk time"
  row "ls sessions/ (names only), warm (s)" "$ls_warm" "$ls_disk" "$(ratio "$ls_warm" "$ls_disk") disk time"
  row "grep -rl */events.jsonl ($NSESS), first (s)" "$grep_cold" "$grep_disk_cold" "$(ratio "$grep_cold" "$grep_disk_cold") disk time"
  row "grep -rl */events.jsonl ($NSESS), repeated (s)" "$grep_warm" "$grep_disk" "$(ratio "$grep_warm" "$grep_disk") disk time"
  row "grep -rl */events.jsonl ($NSESS), repeated, vs floor (s)" "$grep_warm" "$grep_floor" "$(ratio "$grep_warm" "$grep_floor") the do-nothing server ($(ratio "$grep_floor" "$grep_disk") disk)"
  row "dshfs VmHWM after those greps" "$grep_hwm MiB" "-" "-"
  row "listing: dshfs ls vs harness list() (s)" "$dls" "$hlist" "$(ratio "$hlist" "$dls") faster"
  row "listing: mount start-up vs list() (s)" "$startup" "$hlist" "$(ratio "$hlist" "$startup") faster"
  row "listing: ls -l MNT warm vs list() (s)" "$lsl_warm" "$hlist" "$(ratio "$hlist" "$lsl_warm") faster"
  row "listing: ls MNT warm vs list() (s)" "$ls_warm" "$hlist" "$(ratio "$hlist" "$ls_warm") faster"
  row "dshfs idle CPU, $NSESS sessions mounted" "$idle" "-" "-"
fi

# --- 3. grep -r over the whole mount, and its RSS ------------------------------------------------------------
if ! skip rss; then
  echo
  echo "== 3. grep -r '$PATTERN' MNT/sessions/ (stopped after ${GREP_TIMEOUT}s) vs grep -r of an rsync -a copy of the mount"
  COPY="$WORK/many-$SESSIONS-$PER.rsync"
  cold_caches
  mount_store "$MANY" "$MNT"
  base=$(( $(hwm "$MPID") / 1024 ))
  s=$(now)
  ( timeout "$GREP_TIMEOUT" grep -rc -- "$PATTERN" "$MNT/sessions/" 2>"$WORK/grep-r.err" | wc -l >"$WORK/grep-r.files"
    exit "${PIPESTATUS[0]}" ) &
  GPID=$!
  peak_rss=0
  while kill -0 "$GPID" 2>/dev/null; do
    r=$(rss "$MPID"); [ "$r" -gt "$peak_rss" ] && peak_rss=$r
    sleep 0.5
  done
  rc=0; wait "$GPID" || rc=$?
  e=$(now)
  grep_r=$(secs "$s" "$e")
  files=$(cat "$WORK/grep-r.files")
  errs=$(wc -l <"$WORK/grep-r.err")
  peak=$(( $(hwm "$MPID") / 1024 ))
  state="finished"; [ "$rc" -eq 124 ] && state="stopped at the time limit"
  echo "  grep -r $state after $grep_r s: $files files read ($(awk -v f="$files" -v t="$grep_r" 'BEGIN{printf "%.0f", f/t}') files/s), $errs error lines (see $WORK/grep-r.err)"
  echo "  dshfs VmHWM: $base MiB after mount, $peak MiB after grep -r (sampled VmRSS peak $((peak_rss / 1024)) MiB)"
  row "dshfs VmHWM under grep -r ($files files)" "${peak} MiB" "-" "-"
  if [ ! -f "$COPY/.complete" ]; then
    echo "  copying the mount with rsync -a into $COPY (once; cached)"
    rm -rf "$COPY"; mkdir -p "$COPY"
    rsync -a "$MNT/sessions/" "$COPY/" || echo "  warning: rsync -a of the mount exited $?" >&2
    touch "$COPY/.complete"
  fi
  unmount_store "$MNT"
  if [ "$rc" -ne 124 ]; then
    cold_caches
    grep_r_disk=$(timeit grep -rc -- "$PATTERN" "$COPY/")
    cfiles=$(grep -rc -- "$PATTERN" "$COPY/" | grep -vc '/\.complete:' || true)
    echo "  grep -r of the copy (first, caches dropped): $grep_r_disk s, $cfiles files"
    row "grep -r sessions/ ($files files), first (s)" "$grep_r" "$grep_r_disk" "$(ratio "$grep_r" "$grep_r_disk") disk time"
  fi
fi

# --- 4. tail -f latency after an external append ---------------------------------------------------------------
# tail_series ROOT ID MNT LABEL TAILFLAGS...: APPENDS appends of one turn, each timed until its turn/end line
# shows in the tail output; prints "median-from-start median-from-commit max-from-commit".
tail_series() {
  local root=$1 id=$2 mnt=$3 label=$4; shift 4
  local out="$WORK/tail.out" from_start=() from_commit=() t0 t1 t2 want
  : >"$out"
  tail -n0 "$@" -f "$mnt/sessions/$id/events.jsonl" >"$out" &
  local tp=$!
  TAILPIDS+=("$tp")
  sleep 2.3
  for i in $(seq "$APPENDS"); do
    want=$(( $(grep -c '"type":"turn/end"' "$out" || true) + 1 ))
    t0=$(now)
    "$GEN" -append -mode zstd -id "$id" "$root" 1
    t1=$(now)
    while [ "$(grep -c '"type":"turn/end"' "$out" || true)" -lt "$want" ]; do
      if [ $(( ($(now) - t0) / 1000000000 )) -ge 20 ]; then echo "  $label: append $i not seen after 20 s" >&2; break; fi
      sleep 0.01
    done
    t2=$(now)
    from_start+=("$(secs "$t0" "$t2")")
    from_commit+=("$(secs "$t1" "$t2")")
    # a random pause of 1-2 s: a fixed one would lock every append to the same phase of the 1 s poll grids
    sleep "$(awk -v r="$RANDOM" 'BEGIN{printf "%.3f", 1 + r/32768}')"
  done
  kill "$tp" 2>/dev/null || true
  wait "$tp" 2>/dev/null || true
  echo "  $label: from append start ${from_start[*]} s; from commit ${from_commit[*]} s" >&2
  echo "$(printf '%s\n' "${from_start[@]}" | median) $(printf '%s\n' "${from_commit[@]}" | median) $(printf '%s\n' "${from_commit[@]}" | sort -g | tail -1)"
}
if ! skip tail; then
  echo
  echo "== 4. tail -f latency after an external append (median of $APPENDS)"
  TROOT="$WORK/tail-root"
  rm -rf "$TROOT"
  "$GEN" -mode zstd -id tail-bench "$TROOT" 1000
  mount_store "$TROOT" "$MNT"
  read -r a b c < <(tail_series "$TROOT" tail-bench "$MNT" "1 session, tail -f")
  row "tail -f latency, 1 session (s, commit->seen)" "$b" "-" "max $c"
  echo "  1 session, tail -f: median $a s from append start, $b s from commit (max $c s)"
  read -r a b c < <(tail_series "$TROOT" tail-bench "$MNT" "1 session, tail -f -s 0.1" -s 0.1)
  row "tail -f -s 0.1, 1 session (s, commit->seen)" "$b" "-" "max $c"
  echo "  1 session, tail -f -s 0.1: median $a s from append start, $b s from commit (max $c s)"
  unmount_store "$MNT"
  if [ -f "$MANY/.complete" ]; then
    "$GEN" -mode zstd -id tail-bench "$MANY" 1000
    mount_store "$MANY" "$MNT"
    read -r a b c < <(tail_series "$MANY" tail-bench "$MNT" "$NSESS+1 sessions, tail -f")
    row "tail -f latency, $NSESS+1 sessions (s, commit->seen)" "$b" "-" "max $c"
    echo "  $NSESS+1 sessions, tail -f: median $a s from append start, $b s from commit (max $c s)"
    read -r a b c < <(tail_series "$MANY" tail-bench "$MNT" "$NSESS+1 sessions, tail -f -s 0.1" -s 0.1)
    row "tail -f -s 0.1, $NSESS+1 sessions (s, commit->seen)" "$b" "-" "max $c"
    echo "  $NSESS+1 sessions, tail -f -s 0.1: median $a s from append start, $b s from commit (max $c s)"
    unmount_store "$MNT"
    rm -rf "$MANY/--home-dev-bench--/tail-bench"
  fi
fi

echo
echo "== summary (load average now: $(loadavg); CPU time stolen by the hypervisor during the run: $(( ($(steal_ticks) - STEAL0) / $(getconf CLK_TCK) )) s)"
printf '%-52s| %-14s| %-14s| %s\n' "measure" "dshfs" "baseline" "ratio"
for r in "${SUMMARY[@]}"; do echo "$r"; done
echo "baselines: cat = the same bytes on tmpfs; ls/grep = the decompressed mirror on disk (page cache warm);"
echo "listing = the harness's list() in a fresh Node 22 process (inspect.mjs ROOT - list)."
echo "ratios: 'of tmpfs' = dshfs throughput / tmpfs throughput; 'disk time' = dshfs time / disk time;"
echo "'faster' = harness time / dshfs time."
