#!/usr/bin/env bash
# bench/compact.sh [N] — manual compaction of an N-event (default 500000) zstd session with the built-in
# extractive summarizer: `dshfs compact STORE ID`, wall time and peak RSS, against two baselines run in the
# same run of the script on the same file:
#   - `dshfs check STORE ID`: loading and validating the session, i.e. what the session engine holds
#     before a compaction starts (a compaction should cost little more than that);
#   - the harness's own inspect() (Node 22, pinned packages) of the same session.
# Every compact run works on a fresh copy of the store (a compaction appends to it). Medians of RUNS
# (default 3) are printed with the ratios.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-500000}
RUNS=${RUNS:-3}
WORK=${BENCH_DIR:-${TMPDIR:-/tmp}/dshfs-bench}
mkdir -p "$WORK"
. bench/common.sh
bench_setup inspect.mjs
load_session "$N"
echo "session: $(find "$ROOT" -name session.jsonl.zstd) ($N events)"

compact_once() {
  rm -rf "$WORK/compact-copy"; cp -r "$ROOT" "$WORK/compact-copy"
  measure "$WORK/dshfs" compact "$WORK/compact-copy" bench
}
"$WORK/dshfs" check "$ROOT" bench >/dev/null # warm the page cache
c=(); k=(); h=()
for i in $(seq "$RUNS"); do
  c+=("$(compact_once)")
  k+=("$(measure "$WORK/dshfs" check "$ROOT" bench)")
  h+=("$(measure "$NODE22" "$CACHE/inspect.mjs" "$ROOT" bench events)")
done
ct=$(col 1 "${c[@]}"); cr=$(col 2 "${c[@]}")
kt=$(col 1 "${k[@]}"); kr=$(col 2 "${k[@]}")
ht=$(col 1 "${h[@]}"); hr=$(col 2 "${h[@]}")
"$WORK/dshfs" cat --view compactions "$WORK/compact-copy" bench | tail -1 | cut -c1-200
printf 'dshfs compact:       %ss, peak RSS %s MiB\n' "$ct" "$((cr / 1024))"
printf 'dshfs check (load):  %ss, peak RSS %s MiB\n' "$kt" "$((kr / 1024))"
printf 'harness inspect():   %ss, peak RSS %s MiB\n' "$ht" "$((hr / 1024))"
awk -v a="$ct" -v b="$kt" -v c="$ht" -v ra="$cr" -v rb="$kr" 'BEGIN{printf "compact / load: %.2fx time, %.2fx RSS; harness inspect / compact: %.2fx time\n", a/b, ra/rb, c/a}'
