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
#   6. format v4 sessions against v0 sessions of the same turns (bench/gensession -generation 4): sync of a
#      V4_SESSIONS-session (default 2000, V4_PER=50 events of v0 each) store of each into an empty fleet
#      database (events/s and turns/s), and the same sync again (nothing changed); then one session of
#      V4_BIG (default 100000) v4 events, and the v0 session of the same turns: its first sync, the same sync
#      again, a new `dshfs sync` after it grew by one turn (median of RUNS), and a turn appended while
#      `dshfs sync --watch` runs, until the watch reports it copied (median of V4_GROWS after a warm-up).
# Env: SESSIONS PER BIG LS_SESSIONS LS_PER RUNS COLD_RUNS APPENDS PATTERN V4_SESSIONS V4_PER V4_BIG V4_GROWS
# BENCH_DIR; SKIP="sync mount big latency ls v4" (any subset; 2 needs 1's database) skips parts. Every mount
# is served by its own `dshfs mount` process; this script reads it only from outside. Not run by CI.
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
V4_SESSIONS=${V4_SESSIONS:-2000}
V4_PER=${V4_PER:-50}
V4_BIG=${V4_BIG:-100000}
V4_GROWS=${V4_GROWS:-5}
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
TAILPID= WATCHPID=
mount_store() { mount_with "$DSHFS" "$1" "$2"; } # mount_store STORE MNT
cleanup() {
  [ -z "$TAILPID" ] || kill "$TAILPID" 2>/dev/null || true
  [ -z "$WATCHPID" ] || kill "$WATCHPID" 2>/dev/null || true
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

# --- 6. v4 sessions vs v0 sessions of the same turns -----------------------------------------------------------
# gen_root DIR GEN COUNT N: a zstd root of COUNT sessions (s00000…) of generation GEN and >= N events each,
# generated once and cached under $WORK
gen_root() {
  local dir=$1 gen=$2 count=$3 n=$4
  [ ! -f "$dir/.complete" ] || return 0
  echo "== generating $count v$gen sessions of >= $n events into $dir (once; cached)"
  rm -rf "$dir"; mkdir -p "$dir"
  "$GEN" -mode zstd -generation "$gen" -id s00000 "$dir" "$n"
  if [ "$count" -gt 1 ]; then
    seq -f 's%05g' 1 $((count - 1)) | xargs -P "$(nproc)" -n 500 "$GEN" -mode zstd -generation "$gen" "$dir" "$n"
  fi
  touch "$dir/.complete"
}
# held_to DB: the seq after the last event the fleet database holds of session bench
held_to() { "$PSQL" -qtA "$(dsn "$1")" -c "SELECT next_seq FROM sessions WHERE id = 'bench'"; }
# watch_grow ROOT DB PER GROW: `dshfs sync --watch ROOT` into DB (which holds ROOT's session bench already);
# V4_GROWS+1 times `GROW i` appends turn i of PER events, and the time from its return until the watch reports
# the session copied to its new end is taken; the first (which includes the watch's first pass) is dropped.
# Prints the median.
watch_grow() {
  local root=$1 db=$2 per=$3 grow=$4 out="$WORK/watch.out" to i s ts=()
  : >"$out"
  "$DSHFS" sync --watch --host bench "$root" "$(dsn "$db")" >"$out" 2>"$WORK/watch.err" &
  WATCHPID=$!
  to=$(held_to "$db")
  for i in $(seq 0 "$V4_GROWS"); do
    "$grow" "$i" >/dev/null
    s=$(now)
    to=$((to + per))
    until awk -F'\t' -v n="$to" '$2 == "copied" && $3 == "bench" && $6 + 0 >= n {f=1} END {exit !f}' "$out"; do
      if ! kill -0 "$WATCHPID" 2>/dev/null || [ $(( $(now) - s )) -gt 300000000000 ]; then
        echo "sync --watch did not report seq $to copied:" >&2; cat "$out" "$WORK/watch.err" >&2
        kill "$WATCHPID" 2>/dev/null; exit 1
      fi
      sleep 0.005
    done
    [ "$i" -eq 0 ] || ts+=("$(secs "$s" "$(now)")")
  done
  kill -TERM "$WATCHPID"; wait "$WATCHPID" 2>/dev/null || true; WATCHPID=
  printf '%s\n' "${ts[@]}" | med
}
if ! skip v4; then
  echo
  V4T=$(( (V4_PER + 45) / 46 )) # a v0 turn is 46 events (the first one 47), a v4 turn 11 (and 2 before it)
  V0M="$WORK/v4cmp-v0-$V4_SESSIONS-$V4T" V4M="$WORK/v4cmp-v4-$V4_SESSIONS-$V4T"
  gen_root "$V0M" 0 "$V4_SESSIONS" "$V4_PER"
  gen_root "$V4M" 4 "$V4_SESSIONS" $(( V4T * 11 + 2 ))
  echo "== 6. v4 sessions vs v0 sessions of the same turns"
  a=() b=()
  for i in $(seq "$RUNS"); do
    newdb fleet0; a+=("$(timeit "$DSHFS" sync --host bench "$V0M" "$(dsn fleet0)")")
    newdb fleet4; b+=("$(timeit "$DSHFS" sync --host bench "$V4M" "$(dsn fleet4)")")
  done
  t0=$(printf '%s\n' "${a[@]}" | med); t4=$(printf '%s\n' "${b[@]}" | med)
  e0=$("$PSQL" -qtA "$(dsn fleet0)" -c "SELECT sum(next_seq) FROM sessions")
  e4=$("$PSQL" -qtA "$(dsn fleet4)" -c "SELECT sum(next_seq) FROM sessions")
  per_s() { awk -v n="$1" -v t="$2" 'BEGIN{printf "%.0f", n/t}'; }
  turns=$(( V4_SESSIONS * V4T ))
  echo "  sync of $V4_SESSIONS sessions ($turns turns): v0 ${t0}s ($e0 events, $(per_s "$e0" "$t0") events/s, $(per_s "$turns" "$t0") turns/s);" \
    "v4 ${t4}s ($e4 events, $(per_s "$e4" "$t4") events/s, $(per_s "$turns" "$t4") turns/s)"
  row "sync of $V4_SESSIONS v4 sessions (events/s)" "$(per_s "$e4" "$t4")" "$(per_s "$e0" "$t0")" "v0 of the same turns: $(ratio "$t0" "$t4") of its turns/s"
  a=() b=()
  for i in $(seq "$RUNS"); do
    a+=("$(timeit "$DSHFS" sync --host bench "$V0M" "$(dsn fleet0)")")
    b+=("$(timeit "$DSHFS" sync --host bench "$V4M" "$(dsn fleet4)")")
  done
  t0=$(printf '%s\n' "${a[@]}" | med); t4=$(printf '%s\n' "${b[@]}" | med)
  echo "  the same sync again (nothing changed): v0 ${t0}s, v4 ${t4}s"
  row "$V4_SESSIONS sessions, sync again, nothing new (s)" "$t4" "$t0" "$(ratio "$t4" "$t0") (v4 / v0)"

  # one big session: BT turns, as v4 (V4_BIG events) and as v0
  BT=$(( (V4_BIG - 2 + 10) / 11 ))
  B0="$WORK/v4cmp-big-v0-$BT" B4="$WORK/v4cmp-big-v4-$BT" P4="$WORK/v4cmp-big-v4-$BT-plus"
  [ -d "$B0" ] || "$GEN" -mode zstd -id bench "$B0" $(( (BT - 1) * 46 + 2 ))
  [ -d "$B4" ] || "$GEN" -mode zstd -id bench -generation 4 "$B4" $(( BT * 11 + 2 ))
  GROWN=$(( RUNS + V4_GROWS + 1 ))
  # the v4 turns appended: the turns after BT of the same generator's longer session, one file each, in the
  # append syntax (seq and time left to the writer)
  [ -d "$P4" ] || "$GEN" -mode zstd -id bench -generation 4 "$P4" $(( (BT + GROWN) * 11 + 2 ))
  rm -rf "$WORK/v4turns"; mkdir -p "$WORK/v4turns"
  "$DSHFS" cat --view events "$P4" bench | tail -n +$(( $("$DSHFS" cat --view events "$B4" bench | wc -l) + 1 )) |
    sed -E 's/"seq":[0-9]+,"time":[0-9]+,//' |
    awk -v d="$WORK/v4turns" '/"type":"turn\/start"/ {n++} {print > (d "/" n)}'
  rm -rf "$WORK/big0" "$WORK/big4"; cp -a "$B0" "$WORK/big0"; cp -a "$B4" "$WORK/big4"
  grow0() { "$GEN" -mode zstd -id bench -append "$WORK/big0" 1; }
  G4=0
  grow4() { G4=$((G4 + 1)); "$DSHFS" append "$WORK/big4" bench "$WORK/v4turns/$G4"; }
  newdb big0; newdb big4
  f0=$(timeit "$DSHFS" sync --host bench "$WORK/big0" "$(dsn big0)")
  f4=$(timeit "$DSHFS" sync --host bench "$WORK/big4" "$(dsn big4)")
  n0=$(held_to big0) n4=$(held_to big4)
  echo "  one session of $BT turns: v0 $n0 events, v4 $n4 events; first sync v0 ${f0}s, v4 ${f4}s"
  row "first sync, one session of $n4 v4 events (s)" "$f4" "$f0" "v0 of the same turns ($n0 events)"
  a=() b=()
  for i in $(seq "$RUNS"); do
    a+=("$(timeit "$DSHFS" sync --host bench "$WORK/big0" "$(dsn big0)")")
    b+=("$(timeit "$DSHFS" sync --host bench "$WORK/big4" "$(dsn big4)")")
  done
  t0=$(printf '%s\n' "${a[@]}" | med); t4=$(printf '%s\n' "${b[@]}" | med)
  echo "  the same sync again (nothing changed): v0 ${t0}s, v4 ${t4}s"
  row "big session, sync again, nothing new (s)" "$t4" "$t0" "$(ratio "$t4" "$t0") (v4 / v0)"
  a=() b=()
  for i in $(seq "$RUNS"); do
    grow0 >/dev/null; a+=("$(timeit "$DSHFS" sync --host bench "$WORK/big0" "$(dsn big0)")")
    grow4 >/dev/null; b+=("$(timeit "$DSHFS" sync --host bench "$WORK/big4" "$(dsn big4)")")
  done
  # the events of one turn, as the fleet store counts them
  PER0=$(( $(held_to big0) - n0 )) PER4=$(( $(held_to big4) - n4 ))
  PER0=$(( PER0 / RUNS )) PER4=$(( PER4 / RUNS ))
  t0=$(printf '%s\n' "${a[@]}" | med); t4=$(printf '%s\n' "${b[@]}" | med)
  echo "  a new sync after one turn was appended: v0 ${t0}s, v4 ${t4}s (medians of $RUNS)"
  row "big session grew a turn, new sync (s)" "$t4" "$t0" "$(ratio "$t4" "$t0") (v4 / v0)"
  w0=$(watch_grow "$WORK/big0" big0 "$PER0" grow0)
  w4=$(watch_grow "$WORK/big4" big4 "$PER4" grow4)
  echo "  sync --watch, a turn appended -> reported copied: v0 ${w0}s, v4 ${w4}s (medians of $V4_GROWS)"
  row "big session grew a turn, sync --watch (s)" "$w4" "$w0" "$(ratio "$w4" "$w0") (v4 / v0)"
  echo "  fleet databases: v0 $(( $(dbsize big0) / 1048576 )) MiB, v4 $(( $(dbsize big4) / 1048576 )) MiB"
fi

echo
printf '%-50s| %-12s| %-12s| %s\n' "figure" "fleet" "baseline" "fleet / baseline"
printf '%s\n' "${SUMMARY[@]}"
