# bench/common.sh — sourced by the bench scripts, from the module root with WORK set. bench_setup installs
# the harness's pinned packages (NODE22, CACHE), copies the interop scripts it is given beside them (ESM
# resolves the packages beside a script) and builds dshfs and gensession into $WORK.
bench_setup() {
  CACHE=${DSHFS_INTEROP_CACHE:-$HOME/.cache/dshfs-interop}
  NODE22=$(bash ../shared/interop/setup.sh "$CACHE")
  local s
  for s in "$@"; do cp "../shared/interop/$s" "$CACHE/"; done
  go build -o "$WORK/dshfs" ./cmd/dshfs
  go build -o "$WORK/gensession" ./bench/gensession
}

# median of the numbers on stdin, one per line
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# measure CMD...: prints "<wall seconds> <peak RSS KiB>" of one run (stdout discarded); the run's stderr is
# shown when it fails. The peak comes from the kernel's accounting of the finished child (GNU time's %M,
# ru_maxrss) where /usr/bin/time exists (Debian package `time`). Without it, VmHWM is read from /proc
# every 10 ms, which costs an awk process per sample: a fifth of a core, taken from a 2-core machine while
# the measured command runs.
measure() {
  local s e peak=0 rss
  s=$(date +%s%N)
  if [ -x /usr/bin/time ]; then
    /usr/bin/time -f %M -o "$WORK/measure.rss" "$@" >/dev/null 2>"$WORK/measure.err" || { cat "$WORK/measure.err" >&2; return 1; }
    e=$(date +%s%N)
    peak=$(tail -n 1 "$WORK/measure.rss")
  else
    "$@" >/dev/null 2>"$WORK/measure.err" &
    local pid=$!
    while kill -0 "$pid" 2>/dev/null; do
      rss=$(awk '/^VmHWM:/ {print $2}' "/proc/$pid/status" 2>/dev/null || true)
      [ -n "$rss" ] && [ "$rss" -gt "$peak" ] && peak=$rss
      sleep 0.01
    done
    wait "$pid" || { cat "$WORK/measure.err" >&2; return 1; }
    e=$(date +%s%N)
  fi
  awk -v a="$s" -v b="$e" -v p="$peak" 'BEGIN{printf "%.4f %d\n", (b-a)/1e9, p}'
}

# col N LINE...: the median of field N of the lines
col() { local n=$1; shift; printf '%s\n' "$@" | awk -v n="$n" '{print $n}' | median; }

# many_sessions SESSIONS PER [GEN]: sets MANY to a zstd root of SESSIONS sessions of >= PER events each, of
# format generation GEN (default 0; 4: v4 sessions, whose turn is 11 events where v0's is 46), generated with
# gensession once and cached under $WORK
many_sessions() {
  local gen=${3:-0}
  MANY="$WORK/many-$1-$2"
  [ "$gen" = 0 ] || MANY="$MANY-v$gen"
  if [ ! -f "$MANY/.complete" ]; then
    echo "== generating $1 sessions of >= $2 events into $MANY (once; cached)"
    rm -rf "$MANY"; mkdir -p "$MANY"
    # one session first, so the parallel writers find the project directory in place
    "$WORK/gensession" -mode zstd -generation "$gen" -id s00000 "$MANY" "$2"
    # many sessions a process: a process start costs about 20 ms of page faults on these VMs
    seq -f 's%05g' 1 $(($1 - 1)) | xargs -P "$(nproc)" -n 500 "$WORK/gensession" -mode zstd -generation "$gen" "$MANY" "$2"
    touch "$MANY/.complete"
  fi
}

# load_session N: sets ROOT to a zstd root holding one session "bench" of >= N events, generated with
# gensession once and cached under $WORK
load_session() {
  ROOT="$WORK/load-$1"
  if [ ! -d "$ROOT" ]; then "$WORK/gensession" -mode zstd -id bench "$ROOT" "$1"; fi
}

# bench_base: with BASE set to a revision, builds that revision's dshfs into $WORK/dshfs-base (from git
# archive: the work tree stays as it is) and sets BASEBIN, so a script can measure the two builds
# alternately in one run, against the same baseline; without BASE, BASEBIN is empty.
bench_base() {
  BASEBIN=
  [ -n "${BASE:-}" ] || return 0
  local src="$WORK/base-src"
  rm -rf "$src"
  mkdir -p "$src"
  git archive "$BASE" | tar -x -C "$src"
  (cd "$src" && go build -o "$WORK/dshfs-base" ./cmd/dshfs)
  BASEBIN="$WORK/dshfs-base"
  echo "base: $(git rev-parse --short "$BASE") built as $BASEBIN"
}

# versus LABEL HARNESS_LABEL DSHFS_ARGS... -- HARNESS_ARGS...: after one warm-up, RUNS alternating runs of
# `dshfs DSHFS_ARGS` (and of the BASE build's, when bench_base set BASEBIN) and of Node 22 with
# HARNESS_ARGS; prints the medians of wall time and peak RSS and the harness's time over each dshfs build's.
versus() {
  local label=$1 hlabel=$2; shift 2
  local args=()
  while [ "$1" != -- ]; do args+=("$1"); shift; done
  shift
  measure "$WORK/dshfs" "${args[@]}" >/dev/null
  local o=() h=() b=() i
  for i in $(seq "$RUNS"); do
    o+=("$(measure "$WORK/dshfs" "${args[@]}")")
    if [ -n "$BASEBIN" ]; then b+=("$(measure "$BASEBIN" "${args[@]}")"); fi
    h+=("$(measure "$NODE22" "$@")")
  done
  local ours theirs base
  ours=$(col 1 "${o[@]}"); theirs=$(col 1 "${h[@]}")
  printf '%-30s %ss, peak RSS %s MiB (medians of %s)\n' "dshfs $label:" "$ours" $(( $(col 2 "${o[@]}") / 1024 )) "$RUNS"
  printf '%-30s %ss, peak RSS %s MiB (medians of %s)\n' "harness $hlabel:" "$theirs" $(( $(col 2 "${h[@]}") / 1024 )) "$RUNS"
  echo "ratio (harness / dshfs): $(awk -v a="$theirs" -v b="$ours" 'BEGIN{printf "%.2f", a/b}')x"
  if [ -n "$BASEBIN" ]; then
    base=$(col 1 "${b[@]}")
    printf '%-30s %ss, peak RSS %s MiB (medians of %s)\n' "base dshfs $label:" "$base" $(( $(col 2 "${b[@]}") / 1024 )) "$RUNS"
    echo "base ratio (harness / base dshfs): $(awk -v a="$theirs" -v b="$base" 'BEGIN{printf "%.2f", a/b}')x"
  fi
}

# The mounts: each one a background `dshfs mount` process, awaited in /proc/mounts (never by touching the
# mount), with XDG (default $WORK/xdg) as its XDG_CACHE_HOME so that the index cache is the script's own.
declare -A MOUNT_PID=()
MPID=

# cold_caches: an empty index cache and, when this runs as root, the kernel's page, dentry and inode caches
# dropped (otherwise said once: "first" figures then have a warm page cache)
cold_caches() {
  rm -rf "${XDG:-$WORK/xdg}/dshfs"
  sync
  if ! { echo 3 >/proc/sys/vm/drop_caches; } 2>/dev/null; then
    if [ -z "${WARNED_DROP:-}" ]; then echo "  note: not root: page caches not dropped before first runs" >&2; WARNED_DROP=1; fi
  fi
}

# mount_with BIN ROOT MNT [MOUNT ARGS...]: starts `BIN mount ARGS ROOT MNT` in the background, waits until
# the kernel lists the mount and sets MPID; a mount that fails ends the script with its log.
mount_with() {
  local bin=$1 root=$2 mnt=$3 log
  shift 3
  log="$WORK/mount-$(basename "$mnt").log"
  mkdir -p "$mnt"
  XDG_CACHE_HOME="${XDG:-$WORK/xdg}" "$bin" mount "$@" "$root" "$mnt" 2>"$log" &
  MPID=$!
  MOUNT_PID[$mnt]=$MPID
  while ! awk -v m="$mnt" '$2 == m {f=1} END {exit !f}' /proc/mounts; do
    if ! kill -0 "$MPID" 2>/dev/null; then
      echo "$bin mount $root $mnt failed:" >&2; cat "$log" >&2; exit 1
    fi
    sleep 0.01
  done
}

# unmount_store MNT: ends the mount's process (SIGTERM, then after 30 s a lazy unmount and SIGKILL)
unmount_store() {
  local mnt=$1 pid=${MOUNT_PID[$1]:-}
  [ -n "$pid" ] || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$pid" 2>/dev/null; then
    fusermount3 -u -z "$mnt" 2>/dev/null || umount -l "$mnt" 2>/dev/null || true
    kill -KILL "$pid" 2>/dev/null || true
  fi
  wait "$pid" 2>/dev/null || true
  unset "MOUNT_PID[$mnt]"
}

# unmount_all: every mount still up (for an EXIT trap)
unmount_all() { for m in "${!MOUNT_PID[@]}"; do unmount_store "$m"; done; }
