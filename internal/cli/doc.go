// Package cli is the llmworker command line (cmd/llmworker is a thin main
// over Main). Every command takes an Env, so tests run them in-process
// against embedded NATS.
//
// # Commands
//
//   - chat [prompt]: submits a turn (llmw.turn.submit, Nats-Msg-Id = turn
//     id) and renders it live from P.events.<session>.<turn>.>, subscribed
//     before submitting (an ordered consumer on LLMW_EVENTS). Without a
//     prompt it is an interactive session with a session id. A pause asks
//     the person per pending call (approve / deny / edit input as JSON) and
//     publishes llmw.turn.resume; Ctrl-C publishes P.turn.cancel.<turn>.
//     With no NATS URL it starts a Stack in-process, so `chat` alone runs
//     the whole system.
//   - up: a Stack until SIGINT/SIGTERM, then drains in reverse order;
//     --services runs a subset against an existing server and
//     --health-addr serves /healthz and /readyz for Kubernetes probes.
//   - tail: renders worker events like chat, replaying from the start.
//   - tools, hooks: the catalog (KV LLMW_TOOLS) and the hook registry (KV
//     LLMW_HOOKS, in chain order).
//   - agent put, list, show, rm: the agent definitions (KV LLMW_AGENTS,
//     pkg/agents); put reads JSON or YAML and refuses unknown sub-agents
//     and cycles unless --force.
//   - turn submit (--agent NAME[@REV] names an agent), turn cancel, turn
//     resume: submit, cancel and settle turns by id.
//
// # Credentials and replay
//
// chat picks the model from --model, $LLMW_MODEL or the provider keys that
// are set. With none it prints every variable to set (including
// OPENAI_BASE_URL for a local OpenAI-compatible server) and offers
// --replay: internal/replay's recorded provider streams played through the
// real adapters, labelled as a replay on screen.
//
// # Rendering
//
// Renderer prints text as it streams, thinking dimmed (ANSI dim only on a
// terminal without NO_COLOR), tool calls with their arguments, progress and
// truncated results, hook decisions, and usage at the end.
//
// # Exit codes
//
// 0 success; 1 a failed or aborted turn, or any other failure; 2 bad usage
// or missing credentials.
package cli
