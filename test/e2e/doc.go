// Package e2e holds llmworker's multi-host end-to-end tests: every service
// is a separate process in its own container on a private Docker network,
// against a three-node NATS JetStream cluster with R3 streams, and the
// tests crash, cut off and kill those processes while turns run
// (docs/protocol.md §8, "durable through crashes").
//
// # Running
//
// The tests are behind the build tag e2e and need a Docker Engine; no
// image is pulled. TestMain compiles static linux binaries (CGO_ENABLED=0)
// of nats-server, cmd/ingest (run with --replay: recorded provider streams,
// no account, no network), test/e2e/cmd/e2eturn and
// test/e2e/cmd/e2etoolexec, and builds one FROM scratch image per binary
// with testcontainers-go:
//
//	TESTCONTAINERS_RYUK_DISABLED=true go test -tags e2e -count=1 -v ./test/e2e/...
//
// Without a reachable Docker Engine every test skips and says why. Each
// test starts its own cluster or compose stack on a Docker network of its
// own and runs in parallel with the others; -parallel sets how many at
// once (.ci/run runs four).
//
// # Scenarios
//
//   - TestClusterTurns: ingest ×1, turn ×2, toolexec ×2 on the cluster;
//     concurrent turns in every recorded provider format complete, with one
//     tool result per call.
//   - TestTurnReplicaCrash: the turn replica running a turn is killed
//     (SIGKILL) while the turn's tool runs; the other replica resumes from
//     the checkpoint and completes the turn; the tool ran once.
//   - TestToolexecPartition: the toolexec replica running a call is cut off
//     the network; after AckWait the call is redelivered to the other
//     replica; one result per call id; the turn completes, and it stays one
//     result after the cut-off replica is reconnected.
//   - TestNATSNodeLoss: the node leading LLMW_TURNS is killed; turns
//     submitted afterwards complete on the two remaining nodes.
//   - TestTurnOwnerPaused: the replica owning a turn is frozen (docker
//     pause) past its AckWait mid-tool-call and mid-stream, then thawed;
//     the other replica has taken over, and the thawed one's writes are
//     refused (fencing, docs/architecture.md#fencing); then an owner is cut
//     off from NATS mid-tool-call and reconnected.
//   - TestDrainOnSIGTERM: SIGTERM of every service in turn, each restarted,
//     with turns in flight.
//   - TestNATSNodeRestartAndPartition: a node killed mid-turn and restarted
//     (it catches up), then a node cut off from the other two and healed.
//   - TestFaultSchedule: a seeded random schedule of all of the above,
//     each fault kind once per run of rounds, while turns run
//     (LLMW_E2E_SEED=<seed> replays a printed schedule, LLMW_E2E_ROUNDS
//     makes it longer; scripts/faults.sh runs long ones).
//   - TestComposeTurns: deploy/compose.yaml itself, from the images
//     deploy/build-images.sh builds, with docker-compose: toolexec scaled to
//     three, 20 turns with tool calls (one result per call, calls spread
//     over the replicas), then the replica running a call is killed and the
//     call is redelivered and answered once.
//   - TestComposeWithIdentities: deploy/compose.secure.yaml over the same
//     file: nats-server enforces deploy/auth.conf, every service runs as
//     its role; turns complete for a submitter and a reader, and the
//     server refuses the reader's submit and nothing of the services'.
//   - TestSecureCluster: the three-node cluster with TLS from a CA made in
//     the test and the identities of `llmworker permissions`.
//   - TestOneTraceAcrossServices: the services export OTLP to a receiver
//     in the test; one trace id across all of them, also after a turn
//     replica is killed mid-turn.
//
// The turn mixes of TestDrainOnSIGTERM, TestNATSNodeRestartAndPartition
// and TestFaultSchedule (scenarioNames) hold, beside a turn of every
// recorded format, a turn of an agent with a sub-agent (agentScenario):
// its recorded get_capital call runs a child turn, under the faults too.
//
// Every scenario ends with checkHistory, which reads each turn's whole
// history from LLMW_EVENTS, LLMW_TOOLRESULTS and LLMW_TURN_STATE: seq
// gap-free and unique, one terminal event, one result per call in the
// transcript, the results stream and the events, every turn completed,
// and the transcript equal to what a UI rebuilds from the events.
//
// # Test binaries
//
// e2eturn and e2etoolexec are cmd/turn and cmd/toolexec plus the flags the
// tests need and those commands lack (--replicas, toolexec's --ack-wait,
// turn's --step-retries and --ingest-timeout, and --slow to make a tool
// take a while). Every NATS node runs deploy/nats.conf.
package e2e
