#!/usr/bin/env bash
# Peer benchmarks (bench/peers, a module of its own; CI builds and vets it
# with this toolchain but runs no benchmark):
# llmworker against Temporal (regular and local activities, embedded test
# server) and Eino's ReAct agent on the same 10-step agent turn, in the same
# run, interleaved (A B C, then C B A, …). Prints one line per comparison:
#   peer=<name> metric=<metric> llmworker=<value> peer_value=<value> ratio=<llmworker/peer>
# The metric=steal_pct lines are not a comparison: they say how much of the
# machine's CPU its hypervisor gave to other guests while each side ran (a
# quiet machine: 0); step times taken with much of it are not comparable
# (docs/benchmarks.md, Peers). Each repetition's results go to stderr.
# `peers run -side <side> -par <n> -spans` prints where llmworker's steps
# spend their time. Arguments go to `peers all`
# (-rounds n, -crash-rounds n, -only durable,inproc,crash).
# scripts/peers-table.sh turns the comparison lines into docs/benchmarks.md's
# table against issue 46's targets.
set -euo pipefail
cd "$(dirname "$0")/../bench/peers"
# Temporal's server module needs Go >= 1.26.10: this module, and only it,
# builds with the toolchain the Go module proxy serves.
export GOTOOLCHAIN=go1.27.3
bin="$(mktemp -d)/peers"
trap 'rm -rf "$(dirname "$bin")"' EXIT
go build -o "$bin" .
"$bin" all "$@"
