#!/usr/bin/env bash
# Alternating pairs of one benchmark: the test binary of a commit against
# the working tree's, run in turn (A B, B A, …) on the same machine, with
# the load and the steal % of each run. docs/benchmarks.md's overhead
# figures ("The transcript store and the token estimate") come from it.
#
#   scripts/bench-compare.sh <commit> [benchmark] [package] [rounds] [benchtime]
#   scripts/bench-compare.sh 2bb5a3c StepOverheadLazyFsync ./pkg/turn/ 10 200x
set -euo pipefail
cd "$(dirname "$0")/.."
commit=${1:?a commit to compare with}
bench=${2:-StepOverheadLazyFsync}
pkg=${3:-./pkg/turn/}
rounds=${4:-8}
benchtime=${5:-200x}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/src"
git archive "$commit" | tar -x -C "$tmp/src"
(cd "$tmp/src" && go test -c -o "$tmp/base.test" "$pkg")
go test -c -o "$tmp/this.test" "$pkg"
steal() { awk '/^cpu /{print $9, $2+$3+$4+$5+$6+$7+$8+$9}' /proc/stat; }
for r in $(seq 1 "$rounds"); do
  order=(base this)
  if (( r % 2 == 0 )); then order=(this base); fi
  for b in "${order[@]}"; do
    dir="$tmp/src/$pkg"
    if [ "$b" = this ]; then dir="$PWD/$pkg"; fi
    load=$(cut -d' ' -f1 /proc/loadavg)
    s0=$(steal)
    out=$(cd "$dir" && "$tmp/$b.test" -test.run '^$' -test.bench "^Benchmark${bench}\$" \
      -test.benchtime "$benchtime" -test.benchmem | grep '^Benchmark' | tr -s ' \t' ' ')
    s1=$(steal)
    st=$(echo "$s0 $s1" | awk '{d=$4-$2; if (d>0) printf "%.1f", 100*($3-$1)/d; else print 0}')
    echo "round=$r side=$b load=$load steal_pct=$st $out"
  done
done
