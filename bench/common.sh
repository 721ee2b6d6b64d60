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
