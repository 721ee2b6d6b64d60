#!/usr/bin/env bash
# bench/surface.sh [N] — the surface fold and message derivation over an N-event (default 500000) session:
#   surface.Fold + surface.DeriveMessages          (go test -bench BenchmarkCompareFoldDerive ./surface)
#   vs the harness's own foldSurface(events) + Session.create(SessionId(id), events, meta).deriveMessages()
#      (bench/surface-bench.mjs, Node 22 with the pinned packages)
# Both sides read the same file written by bench/gensession (shared with bench/load.sh), load it once, and
# time only the fold + derive on the already-loaded events: Go with -benchtime ${GO_RUNS}x (default 10),
# Node as the median of RUNS (default 3) in-process repetitions after one warm-up. Session.create is part of
# the harness's path (it validates, snapshots and re-folds the seed before deriveMessages can run), so the
# headline ratio includes it; the fold alone is compared too. Prints ns/op of each and the ratios.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-500000}
RUNS=${RUNS:-3}
GO_RUNS=${GO_RUNS:-10}
WORK=${BENCH_DIR:-${TMPDIR:-/tmp}/dshfs-bench}
mkdir -p "$WORK"
CACHE=${DSHFS_INTEROP_CACHE:-$HOME/.cache/dshfs-interop}
NODE22=$(bash ../shared/interop/setup.sh "$CACHE")
cp bench/surface-bench.mjs "$CACHE/"
go build -o "$WORK/gensession" ./bench/gensession
ROOT="$WORK/load-$N"
if [ ! -d "$ROOT" ]; then "$WORK/gensession" -mode zstd -id bench "$ROOT" "$N"; fi
FILE=$(find "$ROOT" -name session.jsonl.zstd)
echo "session: $FILE ($(stat -c %s "$FILE") bytes compressed)"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"

# Go: one benchmark binary run; both benchmarks share one load of the session.
GOOUT=$(DSHFS_BENCH_ROOT="$ROOT" DSHFS_BENCH_ID=bench go test -run '^$' -bench '^BenchmarkCompare(FoldDerive|Fold)$' \
  -benchtime "${GO_RUNS}x" -count 1 ./surface)
echo "$GOOUT" | grep '^Benchmark'
metric() { # metric BENCHNAME UNIT: the value before UNIT on that benchmark's line
  echo "$GOOUT" | awk -v b="$1" -v u="$2" '$1 ~ "^"b"(-[0-9]+)?$" {for (i = 2; i <= NF; i++) if ($i == u) print $(i-1)}'
}
go_total=$(metric BenchmarkCompareFoldDerive ns/op)
go_fold=$(metric BenchmarkCompareFold ns/op)
go_events=$(metric BenchmarkCompareFoldDerive events)
go_messages=$(metric BenchmarkCompareFoldDerive messages)

# Node: load once, then RUNS timed repetitions in-process.
JS=$("$NODE22" --max-old-space-size=8192 "$CACHE/surface-bench.mjs" "$ROOT" bench "$RUNS")
echo "harness: $JS"
js() { echo "$JS" | jq -r ".$1"; }
h_total=$(js totalNs); h_fold=$(js foldNs); h_create=$(js createNs); h_derive=$(js deriveNs)
echo "events: dshfs $go_events, harness $(js events); messages: dshfs $go_messages, harness $(js messages)"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

ratio() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.2f", a/b}'; }
ms() { awk -v a="$1" 'BEGIN{printf "%.1f ms", a/1e6}'; }
echo
printf '%-58s %14s %12s\n' "phase" "ns/op" ""
printf '%-58s %14s %12s\n' "dshfs Fold + DeriveMessages (Go, ${GO_RUNS}x)" "$go_total" "$(ms "$go_total")"
printf '%-58s %14s %12s\n' "dshfs Fold alone" "$go_fold" "$(ms "$go_fold")"
printf '%-58s %14s %12s\n' "harness foldSurface + create + deriveMessages (median $RUNS)" "$h_total" "$(ms "$h_total")"
printf '%-58s %14s %12s\n' "  harness foldSurface" "$h_fold" "$(ms "$h_fold")"
printf '%-58s %14s %12s\n' "  harness Session.create(id, events, meta)" "$h_create" "$(ms "$h_create")"
printf '%-58s %14s %12s\n' "  harness deriveMessages()" "$h_derive" "$(ms "$h_derive")"
echo "ratio fold+derive (harness total / dshfs):          $(ratio "$h_total" "$go_total")x"
echo "ratio fold+derive without Session.create:           $(ratio "$((h_fold + h_derive))" "$go_total")x"
echo "ratio fold alone (foldSurface / Fold):              $(ratio "$h_fold" "$go_fold")x"
