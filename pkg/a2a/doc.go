// Package a2a serves every agent of the registry LLMW_AGENTS (pkg/agents)
// over the Agent2Agent protocol, version 1.0 and 0.3 on the same URLs,
// with the official SDK github.com/a2aproject/a2a-go/v2: its a2asrv
// JSON-RPC and REST bindings and its a2acompat/a2av0 0.3 layer decode and
// encode every request; this package answers them from turns
// (docs/protocol.md, "A2A").
//
//	POST /a2a/NAME                            JSON-RPC: 1.0 methods (SendMessage, …)
//	                                          and 0.3 methods (message/send, …)
//	POST /a2a/NAME/message:send, GET /a2a/NAME/tasks/{id}, …
//	                                          REST (HTTP+JSON); the A2A-Version
//	                                          header 0.x selects the 0.3 binding
//	GET  /a2a/NAME/.well-known/agent-card.json the agent's card
//	GET  /.well-known/agent-card.json          the default agent's card
//
// A task is a turn of the agent: the task id is the turn id
// ("a2a-NAME-" + a nuid), the contextId the session. Server keeps no
// state and no task store of its own: a2a-go's RequestHandler is
// implemented on the turn client and LLMW_EVENTS, every task is read by
// folding its turn's stored events through a Mapper — the one place turn
// events become A2A tasks and events — so every gateway replica answers
// every request alike, and a stream picked up on another replica
// (SubscribeToTask) continues with nothing missing or doubled. Push
// notification configs are kept per task in LLMW_A2A_PUSH; the replicas
// share one durable consumer of the turns' state changes and post each
// to its task's configs with a2a-go's push sender, with retries.
package a2a
