// Package agents is the registry of named agents: definitions
// (events.AgentDefinition) in the KV bucket LLMW_AGENTS, one key per
// agent name, whose KV revision is the definition's version
// (docs/protocol.md §5, "Agents").
//
// Put validates a definition and checks its sub-agents against the
// registry: each must exist, and none may lead back to the agent being
// put (an agent that names itself is allowed). Either problem refuses
// the put unless PutOptions.Force is set, when it is returned as a
// warning instead. Resolve reads "NAME" (the latest revision) or
// "NAME@REV" (that revision, also after a later put or a delete, while
// the bucket's history of events.AgentHistory revisions per name holds
// it). Delete keeps the history; Resolve of NAME then reports
// ErrUnknownAgent.
//
// ParseDefinition reads a definition from JSON or YAML. The type and its
// field checks are NATS-free, in pkg/events; this package adds the store.
package agents
