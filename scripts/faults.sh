#!/usr/bin/env bash
# Soak of the e2e fault schedule: runs TestFaultSchedule (test/e2e) with a
# new random seed each time and a long schedule (LLMW_E2E_ROUNDS, default
# 16 rounds: every fault kind four times), and prints every seed with its
# outcome, so that a failing schedule can be replayed with
# LLMW_E2E_SEED=<seed> LLMW_E2E_ROUNDS=<rounds>. CI runs one round of each
# fault kind with a pinned seed (.ci/run); this explores new and longer
# ones. Needs Docker, like the e2e suite.
#
#   scripts/faults.sh        # 5 schedules
#   scripts/faults.sh 20     # 20 schedules (about 3 minutes each)
#   LLMW_E2E_ROUNDS=32 scripts/faults.sh 5
set -uo pipefail
cd "$(dirname "$0")/.."
export TESTCONTAINERS_RYUK_DISABLED=true
runs="${1:-5}"
export LLMW_E2E_ROUNDS="${LLMW_E2E_ROUNDS:-16}"
# Compile once up front: each run's TestMain builds its binaries within a
# fixed time, which a cold build on a busy machine can exceed, and a
# schedule that never ran is no finding.
CGO_ENABLED=0 GOOS=linux go build -trimpath ./cmd/ingest ./cmd/hookbridge ./test/e2e/cmd/... github.com/nats-io/nats-server/v2
go test -tags e2e -c -o /dev/null ./test/e2e/
failed=0
for i in $(seq 1 "$runs"); do
  seed=$(od -An -N8 -tu8 /dev/urandom | tr -d ' ')
  log=$(mktemp -t llmw-faults-XXXXXX.log)
  if LLMW_E2E_SEED="$seed" go test -tags e2e -count=1 -timeout 15m -run '^TestFaultSchedule$' ./test/e2e/ >"$log" 2>&1; then
    echo "run $i: seed $seed ok"
    rm -f "$log"
  else
    echo "run $i: seed $seed FAILED (log: $log; replay: LLMW_E2E_SEED=$seed LLMW_E2E_ROUNDS=$LLMW_E2E_ROUNDS go test -tags e2e -run '^TestFaultSchedule\$' ./test/e2e/)"
    failed=$((failed + 1))
  fi
done
echo "$((runs - failed)) passed, $failed failed"
[ "$failed" -eq 0 ]
