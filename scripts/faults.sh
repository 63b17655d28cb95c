#!/usr/bin/env bash
# Soak of the e2e fault schedule: runs TestFaultSchedule (test/e2e) with a
# new random seed each time, and prints every seed with its outcome, so
# that a failing schedule can be replayed with LLMW_E2E_SEED=<seed>. CI
# runs the schedule once with a pinned seed (.ci/run); this explores new
# ones. Needs Docker, like the e2e suite.
#
#   scripts/faults.sh        # 5 schedules
#   scripts/faults.sh 20     # 20 schedules (about 3 minutes each)
set -uo pipefail
cd "$(dirname "$0")/.."
export TESTCONTAINERS_RYUK_DISABLED=true
runs="${1:-5}"
failed=0
for i in $(seq 1 "$runs"); do
  seed=$(od -An -N8 -tu8 /dev/urandom | tr -d ' ')
  log=$(mktemp -t llmw-faults-XXXXXX.log)
  if LLMW_E2E_SEED="$seed" go test -tags e2e -count=1 -timeout 15m -run '^TestFaultSchedule$' ./test/e2e/ >"$log" 2>&1; then
    echo "run $i: seed $seed ok"
    rm -f "$log"
  else
    echo "run $i: seed $seed FAILED (log: $log; replay: LLMW_E2E_SEED=$seed go test -tags e2e -run '^TestFaultSchedule\$' ./test/e2e/)"
    failed=$((failed + 1))
  fi
done
echo "$((runs - failed)) passed, $failed failed"
[ "$failed" -eq 0 ]
