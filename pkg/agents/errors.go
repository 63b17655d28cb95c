package agents

import "errors"

var (
	// ErrUnknownAgent is returned by Resolve (and Delete) when no
	// definition has the name, or the revision asked for is not one of
	// the name's (never was, or is past the history the bucket keeps).
	ErrUnknownAgent = errors.New("agents: unknown agent")

	// ErrUnknownSubAgent is returned by Put when a definition's agents
	// name an agent the registry does not hold (without
	// PutOptions.Force).
	ErrUnknownSubAgent = errors.New("agents: unknown sub-agent")

	// ErrCycle is returned by Put when a definition's agents lead back to
	// the agent through another one, A → B → A (without
	// PutOptions.Force). An agent that names itself is not a cycle in
	// this sense: its calls stop at the depth limit.
	ErrCycle = errors.New("agents: sub-agent cycle")

	// ErrNotProvisioned is returned when the bucket LLMW_AGENTS does not
	// exist (run llmworker provision).
	ErrNotProvisioned = errors.New("agents: bucket LLMW_AGENTS does not exist (run llmworker provision)")

	// ErrCorrupt is returned when a stored value is not a valid
	// definition (written by something other than Put).
	ErrCorrupt = errors.New("agents: stored definition is not valid")
)
