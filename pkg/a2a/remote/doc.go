// Package remote is the client side of llmworker's A2A support: a remote
// agent reached over the Agent2Agent protocol, as the turn service runs
// a sub-agent whose definition has an a2a_url (docs/protocol.md §12,
// "Remote agents"): Agents is the turn service's turn.Config.RemoteAgents,
// and an Agent its turn.RemoteAgent. It is a2a-go's a2aclient, resolved from the agent's
// card with the card's interfaces honoured — protocol 1.0 or 0.3
// (a2acompat/a2av0), JSON-RPC or HTTP+JSON — and reduces the A2A task to
// what a turn needs: Send a message (with the message id the caller
// gives, so that a resend is recognisable), Follow the task (its stream,
// SubscribeToTask, or GetTask polled when the card has no streaming)
// until it is final or waits for input, Reply to a task that waits for
// input, and Cancel. A task's artifacts come as their text (text parts
// and data parts' JSON, which the turn streams) and as their parts
// (turn.RemotePart: text, data, a file's bytes or URL with its media
// type and name), which the turn makes its answer of. No A2A wire code
// is written here.
//
// A bearer token (Config.Token; TokenEnv names the variable the turn
// service reads it from) is sent to the host of the agent's URL only:
// never to another host, whatever the card's interfaces name.
package remote
