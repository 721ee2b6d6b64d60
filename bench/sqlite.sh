#!/usr/bin/env bash
# bench/sqlite.sh [N] [SESSIONS] — the SQLite backend against zstd JSONL, each measured in the same
# run of the script on the same data (medians of RUNS, default 3):
#   1. cold load of an N-event session (default 500000): `dshfs cat --view events` from the SQLite database
#      (converted from the zstd store) vs from the zstd JSONL store — wall time and peak RSS;
#   2. `dshfs convert` throughput in events/s: the zstd store → a new SQLite database, and back to a new
#      zstd root;
#   3. listing SESSIONS sessions (default 10000, PER=50 events each, generated once and cached):
#      `dshfs ls` of one database vs of the JSONL root holding the same sessions.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-500000}
SESSIONS=${2:-10000}
PER=${PER:-50}
RUNS=${RUNS:-3}
WORK=${BENCH_DIR:-${TMPDIR:-/tmp}/dshfs-bench}
mkdir -p "$WORK"
chmod 700 "$WORK" # the harness's rule for a database's directory: owned by the user, not group/world-writable
. bench/common.sh
go build -o "$WORK/dshfs" ./cmd/dshfs
go build -o "$WORK/gensession" ./bench/gensession


load_session "$N"
DB="$WORK/load-$N.db"
if [ ! -f "$DB" ]; then "$WORK/dshfs" convert "$ROOT" "$DB" >/dev/null; fi
echo "== 1. cold load of a $N-event session: $(du -h "$DB" | cut -f1) database vs $(du -h "$(find "$ROOT" -name 'session.jsonl.zstd')" | cut -f1) zstd transcript"
"$WORK/dshfs" cat "$ROOT" bench >/dev/null; "$WORK/dshfs" cat "$DB" bench >/dev/null # page cache warm for both
s=(); z=()
for _ in $(seq "$RUNS"); do
  s+=("$(measure "$WORK/dshfs" cat --view events "$DB" bench)")
  z+=("$(measure "$WORK/dshfs" cat --view events "$ROOT" bench)")
done
st=$(col 1 "${s[@]}"); sr=$(col 2 "${s[@]}"); zt=$(col 1 "${z[@]}"); zr=$(col 2 "${z[@]}")
printf 'sqlite: %ss, peak RSS %s MiB\nzstd:   %ss, peak RSS %s MiB\n' "$st" "$((sr / 1024))" "$zt" "$((zr / 1024))"
awk -v a="$st" -v b="$zt" -v ra="$sr" -v rb="$zr" 'BEGIN{printf "sqlite / zstd: %.2fx time, %.2fx RSS\n", a/b, ra/rb}'

echo "== 2. convert throughput ($N events)"
to=(); back=()
for _ in $(seq "$RUNS"); do
  rm -f "$WORK/conv.db"; rm -rf "$WORK/conv-back"
  to+=("$(measure "$WORK/dshfs" convert "$ROOT" "$WORK/conv.db")")
  back+=("$(measure "$WORK/dshfs" convert "$WORK/conv.db" "jsonl:$WORK/conv-back")")
done
tt=$(col 1 "${to[@]}"); bt=$(col 1 "${back[@]}")
awk -v a="$tt" -v b="$bt" -v n="$N" 'BEGIN{printf "zstd -> sqlite: %.2fs, %.0f events/s\nsqlite -> zstd: %.2fs, %.0f events/s\n", a, n/a, b, n/b}'

many_sessions "$SESSIONS" "$PER"
MANYDB="$WORK/many-$SESSIONS-$PER.db"
if [ ! -f "$MANYDB" ]; then "$WORK/dshfs" convert "$MANY" "$MANYDB" >/dev/null; fi
echo "== 3. listing $SESSIONS sessions: one $(du -h "$MANYDB" | cut -f1) database vs the JSONL root"
"$WORK/dshfs" ls "$MANYDB" >/dev/null; "$WORK/dshfs" ls "$MANY" >/dev/null
l=(); j=()
for _ in $(seq "$RUNS"); do
  l+=("$(measure "$WORK/dshfs" ls "$MANYDB")")
  j+=("$(measure "$WORK/dshfs" ls "$MANY")")
done
lt=$(col 1 "${l[@]}"); jt=$(col 1 "${j[@]}")
printf 'ls sqlite: %ss\nls jsonl:  %ss\n' "$lt" "$jt"
awk -v a="$lt" -v b="$jt" 'BEGIN{printf "sqlite / jsonl: %.2fx\n", a/b}'
