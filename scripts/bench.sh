#!/usr/bin/env bash
# The project's benchmark command: runs every benchmark behind a target in
# docs/benchmarks.md and prints the raw `go test -bench` output, so the
# numbers recorded there can be reproduced. Run it on a quiet machine:
# everything (NATS, ingest, turn, the UI subscriber) shares the same cores.
#
#   scripts/bench.sh            # all, -count 5 where cheap
#   scripts/bench.sh turn       # only benchmarks whose package path matches
set -euo pipefail
cd "$(dirname "$0")/.."
filter="${1:-}"

run() { # package, -bench regexp, extra flags...
  local pkg=$1 re=$2; shift 2
  if [ -n "$filter" ] && [[ "$pkg" != *"$filter"* ]]; then return; fi
  echo "## go test -run '^\$' -bench '$re' -benchmem $* $pkg"
  go test -run '^$' -bench "$re" -benchmem "$@" "$pkg" | grep -E '^(Benchmark|ok|FAIL|cpu:)'
}

# Core library (issue 2): one text delta to two handlers, 0 allocs.
run ./pkg/timeline/ DispatchTextDelta2Handlers -count 5
run ./pkg/worker/ . -count 5
run ./pkg/hook/ . -count 3
run ./pkg/tool/ . -count 3
# The token estimate before each model call (issue 43): no encoding.
run ./pkg/llm/ EstimateTokens -count 3

# Providers (issue 3): normalization vs the SDK merely reading the stream.
run ./pkg/provider/openai/ . -count 8
run ./pkg/provider/openairesponses/ . -count 8
run ./pkg/provider/anthropic/ . -count 8
run ./pkg/provider/gemini/ . -count 8
# ingest publishing deltas to an embedded NATS server, one core.
run ./pkg/ingest/ PublishDeltas -cpu 1 -count 5

# NATS runtime (issue 4).
run ./pkg/turn/ FirstDelta -benchtime 500x -count 3
run ./pkg/turn/ StepOverhead -benchtime 200x -count 3
run ./pkg/turn/ DeltaThroughput -benchtime 5x -count 3
run ./pkg/turn/ HeapPerActiveTurn -benchtime 3x -count 3
run ./pkg/toolexec/ ToolRoundTrip -count 3
run ./pkg/emit/ EventPublisherDelta -count 3
run ./pkg/cenats/ . -count 3

# A tool step on a model streaming with live timing (issue 36): calls
# started while the model streams against calls started after it, p50/p99.
run ./pkg/turn/ PacedStep -benchtime 20x

# Sub-agents (issue 44): a sub-agent call's block stop to its child's
# first model request, p50/p99; a child turn against an in-process tool.
run ./pkg/turn/ 'SubAgentStart|SubAgentOverhead' -benchtime 200x -count 3

# A long session (issue 43): 1,000 turns of 40 KB on a 1 MiB server and a
# 32k-token instant model, one session per run (LLMW_LONG_TURNS turns).
LLMW_LONG_TURNS=1000 run ./pkg/turn/ LongSession -benchtime 1x -timeout 3h
# The token estimate and the transcript store on a short turn (issue 43):
# this code against LLMW_BENCH_BASE (2bb5a3c: the code without them),
# alternated pairs.
if [ -z "$filter" ] || [[ ./pkg/turn/ == *"$filter"* ]]; then
  echo "## scripts/bench-compare.sh ${LLMW_BENCH_BASE:-2bb5a3c} StepOverheadLazyFsync ./pkg/turn/ 10 200x"
  scripts/bench-compare.sh "${LLMW_BENCH_BASE:-2bb5a3c}" StepOverheadLazyFsync ./pkg/turn/ 10 200x
fi

# Remote hooks (issue 5).
run ./pkg/hook/hooknats/ RemoteHook -benchtime 3s -count 3

# HTTP gateway (issue 15): worker event to SSE bytes, heap per open stream.
run ./pkg/gateway/ EventToSSE -benchtime 3000x -count 3
run ./pkg/gateway/ IdleStreams -benchtime 1000x -count 3
