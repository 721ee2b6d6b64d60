#!/usr/bin/env bash
# bench/pg.sh — the fleet store's figures (docs/fleet.md), each against a baseline measured in this same run,
# on a private PostgreSQL server the script starts itself (bench/pgserver: initdb into a temp dir as an
# unprivileged user, durability on) and stops at the end:
#   1. sync rate: `dshfs sync` of a SESSIONS-session zstd store (default 10000 sessions of >= PER=50 events)
#      into an empty fleet database, in events/s, vs `dshfs convert` of the same store into a new SQLite
#      database; RUNS (default 3) of each, alternating, medians.
#   2. a mount of the fleet store vs a mount of the JSONL store it came from: ls -l sessions/, first (fresh
#      mount, empty [cache] dir, page caches dropped when root) and repeated (median of RUNS) grep -l PATTERN
#      over every events.jsonl.
#   3. cold cat of the BIG-event session (default 500000) through a fresh mount: fleet vs JSONL, COLD_RUNS
#      mounts each.
#   4. invalidation latency between two mounts of one fleet store: a turn appended through the first mount's
#      append file and flushed, until `tail -f -s 0.1` of events.jsonl on the second prints its last line;
#      median of APPENDS.
#   5. `dshfs ls` of a fleet store of LS_SESSIONS sessions (default 100000, of >= LS_PER=5 events) vs `dshfs ls`
#      of the JSONL store it came from.
# Env: SESSIONS PER BIG LS_SESSIONS LS_PER RUNS COLD_RUNS APPENDS PATTERN BENCH_DIR; SKIP="sync mount big
# latency ls" (any subset; 2 needs 1's database) skips parts. Every mount is served by its own `dshfs mount`
# process; this script reads it only from outside. Not run by CI.
set -euo pipefail
cd "$(dirname "$0")/.."
SESSIONS=${SESSIONS:-10000}
PER=${PER:-50}
BIG=${BIG:-500000}
LS_SESSIONS=${LS_SESSIONS:-100000}
LS_PER=${LS_PER:-5}
RUNS=${RUNS:-3}
COLD_RUNS=${COLD_RUNS:-3}
APPENDS=${APPENDS:-7}
PATTERN=${PATTERN:-FAIL: TestC}
SKIP=${SKIP:-}
WORK=${BENCH_DIR:-${TMPDIR:-/tmp}/dshfs-bench}
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
. bench/common.sh
go build -o "$WORK/dshfs" ./cmd/dshfs
go build -o "$WORK/gensession" ./bench/gensession
go build -o "$WORK/pgserver" ./bench/pgserver
DSHFS="$WORK/dshfs"
GEN="$WORK/gensession"
skip() { [[ " $SKIP " == *" $1 "* ]]; }
now() { date +%s%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.4f\n", (b-a)/1e9}'; }
med() { sort -g | awk '{a[NR]=$1} END {if (NR) print a[int((NR+1)/2)]; else print "nan"}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{if (b+0 == 0 || a == "nan" || b == "nan") print "n/a"; else printf "%.2fx", a/b}'; }
timeit() { # wall seconds of CMD, output discarded; grep's "no match" (1) is not an error
  local s e rc=0
  s=$(now)
  "$@" >/dev/null || rc=$?
  e=$(now)
  [ "$rc" -le 1 ] || echo "  warning: '$*' exited $rc" >&2
  secs "$s" "$e"
}
SUMMARY=()
row() { SUMMARY+=("$(printf '%-50s| %-12s| %-12s| %s' "$1" "$2" "$3" "$4")"); }

# --- the server ----------------------------------------------------------------------------------------------
PSQL=$(compgen -G '/usr/lib/postgresql/*/bin/psql' | sort -V | tail -n 1 || command -v psql)
rm -f "$WORK/pgserver.out" "$WORK/pgserver.err" # a previous run's would be read before this server's
exec 9> >(exec "$WORK/pgserver" >"$WORK/pgserver.out" 2>"$WORK/pgserver.err")
until [ -s "$WORK/pgserver.out" ]; do
  if grep -q . "$WORK/pgserver.err" 2>/dev/null; then cat "$WORK/pgserver.err" >&2; exit 1; fi
  sleep 0.1
done
ADMIN=$(head -n 1 "$WORK/pgserver.out")
dsn() { printf '%s' "${ADMIN/\/postgres\?//$1?}"; }
newdb() { PGOPTIONS="-c client_min_messages=warning" "$PSQL" -q "$ADMIN" -c "DROP DATABASE IF EXISTS $1" -c "CREATE DATABASE $1"; }
dbsize() { "$PSQL" -qtA "$(dsn "$1")" -c "SELECT pg_database_size(current_database())"; }

XDG="$WORK/xdg-pg"
mount_store() { mount_with "$DSHFS" "$1" "$2"; } # mount_store STORE MNT
cleanup() {
  [ -z "$TAILPID" ] || kill "$TAILPID" 2>/dev/null || true
  unmount_all
  exec 9>&- # the server stops when its stdin closes
  wait 2>/dev/null || true
}
trap cleanup EXIT

echo "dshfs fleet store benchmarks: SESSIONS=$SESSIONS PER=$PER BIG=$BIG LS_SESSIONS=$LS_SESSIONS RUNS=$RUNS"
echo "host: $(nproc) cores, $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo), $("$PSQL" -qtA "$ADMIN" -c 'SHOW server_version'), load average: $(cut -d' ' -f1-3 /proc/loadavg)"

# --- 1. sync rate ----------------------------------------------------------------------------------------------
many_sessions "$SESSIONS" "$PER"
if ! skip sync; then
  echo
  echo "== 1. sync of $SESSIONS sessions vs convert into SQLite"
  s=() c=()
  for i in $(seq "$RUNS"); do
    newdb fleet
    s+=("$(timeit "$DSHFS" sync --host bench "$MANY" "$(dsn fleet)")")
    rm -f "$WORK/convert.db"
    c+=("$(timeit "$DSHFS" convert "$MANY" "$WORK/convert.db")")
  done
  st=$(printf '%s\n' "${s[@]}" | med); ct=$(printf '%s\n' "${c[@]}" | med)
  EVENTS=$("$PSQL" -qtA "$(dsn fleet)" -c "SELECT sum(next_seq) FROM sessions")
  echo "  $EVENTS events"
  rate() { awk -v n="$EVENTS" -v t="$1" 'BEGIN{printf "%.0f", n/t}'; }
  echo "  sync: ${st}s ($(rate "$st") events/s); convert to SQLite: ${ct}s ($(rate "$ct") events/s); fleet database $(( $(dbsize fleet) / 1048576 )) MiB, SQLite $(( $(stat -c %s "$WORK/convert.db") / 1048576 )) MiB"
  row "sync of $SESSIONS sessions (events/s)" "$(rate "$st")" "$(rate "$ct")" "$(ratio "$ct" "$st") of convert's rate"
  again=$(timeit "$DSHFS" sync --host bench "$MANY" "$(dsn fleet)")
  echo "  a second sync (nothing to copy): ${again}s"
  row "sync again, nothing new (s)" "$again" "-" ""
fi

# --- 2. the fleet mount vs the JSONL mount ---------------------------------------------------------------------
if ! skip mount; then
  echo
  echo "== 2. mounts: fleet store vs the JSONL store it came from"
  F="$WORK/mnt-fleet" J="$WORK/mnt-jsonl"
  for kind in fleet jsonl; do
    if [ $kind = fleet ]; then store=$(dsn fleet) mnt=$F; else store=$MANY mnt=$J; fi
    cold_caches
    mount_store "$store" "$mnt"
    first=$(timeit grep -l "$PATTERN" "$mnt"/sessions/*/events.jsonl)
    rep=()
    for i in $(seq "$RUNS"); do rep+=("$(timeit grep -l "$PATTERN" "$mnt"/sessions/*/events.jsonl)"); done
    lsl=()
    for i in $(seq "$RUNS"); do lsl+=("$(timeit ls -l "$mnt/sessions/")"); done
    declare "first_$kind=$first" "rep_$kind=$(printf '%s\n' "${rep[@]}" | med)" "lsl_$kind=$(printf '%s\n' "${lsl[@]}" | med)"
    unmount_store "$mnt"
  done
  echo "  grep -l first: fleet ${first_fleet}s, JSONL ${first_jsonl}s; repeated: fleet ${rep_fleet}s, JSONL ${rep_jsonl}s; ls -l: fleet ${lsl_fleet}s, JSONL ${lsl_jsonl}s"
  row "grep -l every events.jsonl, first (s)" "$first_fleet" "$first_jsonl" "$(ratio "$first_fleet" "$first_jsonl") (target <= 1.5x)"
  row "grep -l every events.jsonl, repeated (s)" "$rep_fleet" "$rep_jsonl" "$(ratio "$rep_fleet" "$rep_jsonl") (target <= 1.5x)"
  row "ls -l sessions/ (s)" "$lsl_fleet" "$lsl_jsonl" "$(ratio "$lsl_fleet" "$lsl_jsonl")"
fi

# --- 3. cold cat of a large session ----------------------------------------------------------------------------
if ! skip big; then
  echo
  load_session "$BIG"
  echo "== 3. cold cat of the $BIG-event session"
  newdb big
  "$DSHFS" sync --host bench "$ROOT" "$(dsn big)" >/dev/null
  F="$WORK/mnt-fleet" J="$WORK/mnt-jsonl"
  f=() j=()
  for i in $(seq "$COLD_RUNS"); do
    cold_caches; mount_store "$(dsn big)" "$F"; f+=("$(timeit cat "$F/sessions/bench/events.jsonl")"); unmount_store "$F"
    cold_caches; mount_store "$ROOT" "$J"; j+=("$(timeit cat "$J/sessions/bench/events.jsonl")"); unmount_store "$J"
  done
  ft=$(printf '%s\n' "${f[@]}" | med); jt=$(printf '%s\n' "${j[@]}" | med)
  echo "  fleet ${ft}s, JSONL ${jt}s"
  row "cold cat, $BIG events (s)" "$ft" "$jt" "$(ratio "$ft" "$jt")"
fi

# --- 4. invalidation latency between two mounts ----------------------------------------------------------------
if ! skip latency; then
  echo
  echo "== 4. a write through one fleet mount, seen by tail -f -s 0.1 on another (median of $APPENDS)"
  newdb live
  "$DSHFS" create --cwd /srv/bench "$(dsn live)" lat >/dev/null
  A="$WORK/mnt-a" B="$WORK/mnt-b"
  mount_store "$(dsn live)" "$A"
  mount_store "$(dsn live)" "$B"
  : >"$WORK/tail.out"
  tail -f -s 0.1 "$B/sessions/lat/events.jsonl" >"$WORK/tail.out" &
  TAILPID=$!
  lat=()
  for t in $(seq "$APPENDS"); do
    marker="latency-$t-$RANDOM"
    printf '%s\n' \
      "{\"type\":\"turn/start\",\"data\":{\"turn\":$t}}" \
      "{\"type\":\"step/start\",\"data\":{\"turn\":$t,\"step\":1}}" \
      "{\"type\":\"user/message\",\"data\":{\"id\":\"u-$t\",\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"$marker\"}],\"source\":{\"kind\":\"user\"}},\"surfaceOp\":\"append\"}" \
      "{\"type\":\"step/end\",\"data\":{\"turn\":$t,\"step\":1}}" \
      "{\"type\":\"turn/end\",\"data\":{\"turn\":$t,\"reason\":{\"kind\":\"completed\"}}}" >"$WORK/turn.jsonl"
    cat "$WORK/turn.jsonl" >>"$A/sessions/lat/append"
    echo flush >"$A/sessions/lat/ctl"
    s=$(now)
    until grep -q "\"turn\":$t,\"reason\"" "$WORK/tail.out"; do sleep 0.005; done
    lat+=("$(secs "$s" "$(now)")")
  done
  kill "$TAILPID" 2>/dev/null || true; TAILPID=
  lt=$(printf '%s\n' "${lat[@]}" | med)
  echo "  flush returned -> seen on the other mount: median ${lt}s (${lat[*]})"
  row "write on one mount -> tail -f on another (s)" "$lt" "-" "target <= 1 s"
  unmount_store "$A"; unmount_store "$B"
fi

# --- 5. dshfs ls of a large fleet store ------------------------------------------------------------------------
if ! skip ls; then
  echo
  many_sessions "$LS_SESSIONS" "$LS_PER"
  echo "== 5. dshfs ls of $LS_SESSIONS sessions: fleet store vs the JSONL store"
  newdb wide
  "$DSHFS" sync --host bench "$MANY" "$(dsn wide)" >/dev/null
  f=() j=()
  "$DSHFS" ls "$(dsn wide)" >/dev/null; "$DSHFS" ls "$MANY" >/dev/null
  for i in $(seq "$RUNS"); do
    f+=("$(timeit "$DSHFS" ls "$(dsn wide)")"); j+=("$(timeit "$DSHFS" ls "$MANY")")
  done
  ft=$(printf '%s\n' "${f[@]}" | med); jt=$(printf '%s\n' "${j[@]}" | med)
  echo "  fleet ${ft}s ($("$DSHFS" ls "$(dsn wide)" | wc -l) sessions), JSONL ${jt}s; fleet database $(( $(dbsize wide) / 1048576 )) MiB"
  row "dshfs ls, $LS_SESSIONS sessions (s)" "$ft" "$jt" "$(ratio "$ft" "$jt")"
fi

echo
printf '%-50s| %-12s| %-12s| %s\n' "figure" "fleet" "baseline" "fleet / baseline"
printf '%s\n' "${SUMMARY[@]}"
