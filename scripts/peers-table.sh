#!/usr/bin/env bash
# Turns the comparison lines of scripts/bench-peers.sh (stdin) into the
# rows of the table in docs/benchmarks.md ("Peers, against issue 46's
# targets"): peer, metric, llmworker, peer, ratio, target, met, for the
# comparisons issue 46 sets a target for and the crash measurement; the
# largest steal % of the runs goes in one line under it. -a prints every line.
#
#   scripts/bench-peers.sh -rounds 3 -crash-rounds 1 | tee /tmp/peers.txt
#   scripts/peers-table.sh < /tmp/peers.txt
set -euo pipefail
all=0
if [ "${1:-}" = -a ]; then all=1; fi
awk -v all="$all" '
BEGIN {
  # The targets of issue 46 (ratio = llmworker / peer, at most).
  t["eino step_ms_p50/1tool"] = 0.5;  t["eino step_ms_p50/4tools"] = 0.5
  t["eino step_ms_p99/1tool"] = 0.7;  t["eino step_ms_p99/4tools"] = 0.7
  t["eino bytes_per_step/1tool"] = 0.5; t["eino bytes_per_step/4tools"] = 0.5
  t["temporal-local step_ms_p50/1tool"] = 0.2; t["temporal-local step_ms_p50/4tools"] = 0.4
  t["temporal-local bytes_per_step/1tool"] = 1; t["temporal-local bytes_per_step/4tools"] = 1
  t["temporal-local(llmworker-fsync) step_ms_p50/1tool"] = 1
  t["temporal-regular step_ms_p50/1tool"] = 0.005
  print "| peer | metric | llmworker | peer | ratio | target | met |"
  print "|---|---|---|---|---|---|---|"
}
/^peer=/ {
  for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
  key = v["peer"] " " v["metric"]
  if (v["metric"] ~ /^steal_pct/) {
    for (k = 0; k < 2; k++) { x = (k ? v["peer_value"] : v["llmworker"]) + 0; if (x > steal) steal = x }
    seen = 1
    if (!all) next
    tgt = "(steal %, not a comparison)"; met = ""
  } else if (key in t) { tgt = "≤ " t[key]; met = (v["ratio"] + 0 <= t[key]) ? "yes" : "**no**" }
  else if (all || v["metric"] ~ /^crash/) { tgt = "—"; met = "" }
  else next
  printf "| %s | %s | %s | %s | %s | %s | %s |\n", v["peer"], v["metric"], v["llmworker"], v["peer_value"], v["ratio"], tgt, met
}
END { if (seen) printf "\nsteal: at most %.1f%% of the CPU time of any run (a quiet machine: 0)\n", steal }'
