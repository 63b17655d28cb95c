// Package permissions gives each llmworker role on the bus — a service,
// a client that submits turns, a UI that reads them, the operator who
// provisions — the NATS publish and subscribe rights it needs and no
// others, built from the subject and stream names of package events, so
// that they follow the code. Config renders them as a nats-server
// authorization block (`llmworker permissions` prints it); docs/security.md
// says what each role may do and why.
package permissions

import (
	"fmt"
	"slices"
	"strings"

	"github.com/llmworker/llmworker/pkg/events"
)

// Role is one identity on the bus.
type Role string

const (
	// Ingest serves model calls: answers P.llm.complete, streams
	// P.llm.stream.<id>, listens to P.llm.cancel.*, shares provider
	// limits in LLMW_QUOTA.
	Ingest Role = "ingest"
	// Turn runs turns from LLMW_TURNS: worker events (P.emit.>), model
	// calls, tool calls and results, hook requests, its state buckets,
	// turn cancels it forwards to the replica running the turn, and the
	// child turns of its sub-agent calls it submits and cancels; it reads
	// the agent definitions of LLMW_AGENTS.
	Turn Role = "turn"
	// Toolexec runs tool calls from LLMW_TOOLCALLS and publishes their
	// results; registers its tools in LLMW_TOOLS.
	Toolexec Role = "toolexec"
	// Hookbridge answers hook requests and registers hooks in LLMW_HOOKS.
	Hookbridge Role = "hookbridge"
	// MCP is the MCP gateway (`llmworker mcp`): it reads the tool catalog
	// and the hook registry, sends tool calls and hook requests, publishes
	// its calls' worker events and answers P.mcp.resume.*.
	MCP Role = "mcp"
	// Gateway serves HTTP clients (pkg/gateway): it submits, resumes and
	// cancels turns and hears rejections, as a submitter, asks the turn
	// service to compact sessions (P.session.compact.*), reads
	// LLMW_EVENTS, as a reader, and LLMW_AGENTS, the agents it serves over
	// A2A, and reads and writes LLMW_A2A_PUSH, their tasks' push configs;
	// it answers nothing on the bus.
	Gateway Role = "gateway"
	// Submitter publishes turn requests, resumes and cancels, asks the
	// turn service to compact sessions (P.session.compact.*, `llmworker
	// session compact`), uploads attachments to LLMW_MEDIA, and hears
	// rejections; it reads no state.
	Submitter Role = "submitter"
	// Reader follows worker events: P.events.> live and LLMW_EVENTS
	// through the JetStream API; it publishes nothing else.
	Reader Role = "reader"
	// Provisioner is the operator: it creates and updates the streams and
	// buckets (`llmworker provision`) with the JetStream API of the
	// account, and writes the agent definitions of LLMW_AGENTS
	// (`llmworker agent put`, `agent rm`); nothing else on llmworker's own
	// subjects.
	Provisioner Role = "provision"
)

// Roles lists every role, services first.
var Roles = []Role{Ingest, Turn, Toolexec, Hookbridge, MCP, Gateway, Submitter, Reader, Provisioner}

// Permissions are a role's allow lists. Everything not listed is denied.
type Permissions struct {
	Publish, Subscribe []string
	// Responses lets the role answer requests on the reply subjects it
	// is sent (a request/reply responder), without the right to publish
	// to inboxes at large.
	Responses bool
}

// DefaultInboxPrefix is nats.go's inbox prefix, which the client roles
// (submitter, reader, provisioner) keep: their clients are the nats CLI
// and programs of the users' own.
const DefaultInboxPrefix = "_INBOX"

// InboxPrefix is the prefix of the inboxes of role in the installation of
// prefix ("" = events.DefaultPrefix): the replies of its own requests
// (JetStream API calls, publishes to streams, model calls) and the
// deliveries of its consumers. Each service role has its own,
// _INBOX_<role>.<P>, outside the _INBOX.> that the client roles
// subscribe to, so that no role can read another service's replies —
// the turn state a KV get returns, the tool calls a fetch delivers —
// by subscribing to its inboxes. A service connects with
// nats.CustomInboxPrefix(InboxPrefix(role, prefix)); a client role gets
// DefaultInboxPrefix.
func InboxPrefix(role Role, prefix string) string {
	switch role {
	case Ingest, Turn, Toolexec, Hookbridge, MCP, Gateway:
		return "_INBOX_" + string(role) + "." + events.NewSubjects(prefix).P()
	}
	return DefaultInboxPrefix
}

// streams of the account, with the KV buckets' own streams.
func kv(bucket string) string { return "KV_" + bucket }

// obj is the stream of object store b.
func obj(b string) string { return "OBJ_" + b }

var allStreams = []string{
	events.StreamTurns, events.StreamEvents, events.StreamToolCalls, events.StreamToolResults, events.StreamTranscripts,
	kv(events.BucketSessions), kv(events.BucketTools), kv(events.BucketHooks), kv(events.BucketTurnState),
	kv(events.BucketQuota), kv(events.BucketAgents), kv(events.BucketA2APush), obj(events.BucketMedia), obj(events.BucketRequests),
}

// info is what a service's start needs of every stream and bucket when it
// only verifies them (provision.Options.VerifyOnly).
func info() []string {
	out := []string{"$JS.API.INFO"}
	for _, s := range allStreams {
		out = append(out, "$JS.API.STREAM.INFO."+s)
	}
	return out
}

// read is the JetStream API a consumer of stream s uses: consumers made,
// looked up, fetched from and deleted, single messages read, and the
// acknowledgements and flow-control replies of its deliveries.
func read(s string) []string {
	return []string{
		"$JS.API.STREAM.INFO." + s,
		"$JS.API.CONSUMER.CREATE." + s, "$JS.API.CONSUMER.CREATE." + s + ".>",
		"$JS.API.CONSUMER.DURABLE.CREATE." + s + ".>",
		"$JS.API.CONSUMER.INFO." + s + ".>",
		"$JS.API.CONSUMER.DELETE." + s + ".>",
		"$JS.API.CONSUMER.MSG.NEXT." + s + ".>",
		"$JS.API.STREAM.MSG.GET." + s,
		"$JS.API.DIRECT.GET." + s, "$JS.API.DIRECT.GET." + s + ".>",
		"$JS.ACK." + s + ".>", "$JS.FC." + s + ".>",
	}
}

// bucket is reading, watching and writing KV bucket b.
func bucket(b string) []string { return append(read(kv(b)), "$KV."+b+".>") }

// mediaRead is reading objects of LLMW_MEDIA (pkg/media: a meta lookup,
// an ordered consumer over the chunks).
func mediaRead() []string { return read(obj(events.BucketMedia)) }

// mediaWrite is mediaRead and storing objects: chunks and meta on
// $O.LLMW_MEDIA.>, and the purge of an object's old chunks when it is
// stored again.
func mediaWrite() []string {
	return append(mediaRead(), "$O."+events.BucketMedia+".>", "$JS.API.STREAM.PURGE."+obj(events.BucketMedia))
}

// requestsRead is reading the completion requests that LLMW_REQUESTS
// holds for ingest (a meta lookup, an ordered consumer over the chunks).
func requestsRead() []string { return read(obj(events.BucketRequests)) }

// requestsWrite is storing a completion request in LLMW_REQUESTS and
// deleting it once ingest answered: chunks and meta on
// $O.LLMW_REQUESTS.>, the purge of an object's chunks, and the meta
// lookup both need.
func requestsWrite() []string {
	return append(requestsRead(), "$O."+events.BucketRequests+".>", "$JS.API.STREAM.PURGE."+obj(events.BucketRequests))
}

// discovery is the micro service protocol every service answers
// ($SRV.PING, $SRV.INFO, $SRV.STATS, by service and by instance).
const discovery = "$SRV.>"

// For returns the permissions of role for the installation of prefix
// ("" = events.DefaultPrefix). It panics on an unknown role (Roles lists
// them).
func For(role Role, prefix string) Permissions {
	s := events.NewSubjects(prefix)
	p := s.P()
	inbox := InboxPrefix(role, prefix) + ".>"
	var pub, sub []string
	responses := false
	switch role {
	case Ingest:
		pub = []string{p + ".llm.stream.>"}
		pub = append(pub, mediaRead()...)
		pub = append(pub, requestsRead()...)
		pub = append(pub, bucket(events.BucketQuota)...)
		sub = []string{s.LLMComplete(), s.LLMCancelAll(), discovery, inbox}
		responses = true
	case Turn:
		pub = []string{
			s.EmitAll(), s.LLMComplete(), p + ".llm.cancel.*", s.ToolCallAll(), s.ToolCancelAll(),
			p + ".hook.>", s.TurnRejectedAll(), s.TurnCancelAll(),
			s.TurnSubmit(), // the child turns of its sub-agent calls
		}
		pub = append(pub, read(events.StreamTurns)...)
		pub = append(pub, read(events.StreamToolResults)...)
		pub = append(pub, read(events.StreamEvents)...)
		// Transcripts: appended on P.transcript.> (fenced by the
		// subject's last sequence) and read back on recovery.
		pub = append(pub, s.TranscriptAll())
		pub = append(pub, read(events.StreamTranscripts)...)
		for _, b := range []string{events.BucketTurnState, events.BucketSessions, events.BucketTools, events.BucketHooks} {
			pub = append(pub, bucket(b)...)
		}
		pub = append(pub, mediaWrite()...)
		pub = append(pub, requestsWrite()...)
		pub = append(pub, read(kv(events.BucketAgents))...) // the agents turn requests name
		sub = []string{s.TurnCancelAny(), p + ".llm.stream.>", s.ToolStoredAll(), s.ToolResultAll(), s.ToolProgressAll(), s.SessionCompactAll(), discovery, inbox}
		responses = true
	case Toolexec:
		pub = []string{s.ToolResultAll(), s.ToolProgressAll()}
		pub = append(pub, read(events.StreamToolCalls)...)
		pub = append(pub, read(events.StreamToolResults)...)
		pub = append(pub, bucket(events.BucketTools)...)
		pub = append(pub, mediaWrite()...)
		sub = []string{s.ToolCancelAll(), p + ".tool.invoke.>", discovery, inbox}
		responses = true
	case Hookbridge:
		pub = bucket(events.BucketHooks)
		sub = []string{p + ".hook.>", discovery, inbox}
		responses = true
	case MCP:
		pub = []string{s.EmitAll(), s.ToolCallAll(), s.ToolCancelAll(), p + ".hook.>"}
		pub = append(pub, read(events.StreamToolResults)...)
		pub = append(pub, read(events.StreamEvents)...)
		pub = append(pub, read(kv(events.BucketTools))...)
		pub = append(pub, read(kv(events.BucketHooks))...)
		sub = []string{s.ToolStoredAll(), s.ToolResultAll(), s.ToolProgressAll(), s.MCPResumeAll(), inbox}
		responses = true
	case Gateway:
		pub = append([]string{s.TurnSubmit(), s.TurnResume(), s.TurnCancelAll(), s.SessionCompactAll()}, read(events.StreamEvents)...)
		pub = append(pub, read(events.StreamTranscripts)...)
		pub = append(pub, mediaWrite()...)
		pub = append(pub, read(kv(events.BucketAgents))...) // the agents it serves over A2A
		pub = append(pub, bucket(events.BucketA2APush)...)  // their tasks' push configs
		sub = []string{s.TurnRejectedAll(), inbox}
	case Submitter:
		pub = []string{s.TurnSubmit(), s.TurnResume(), s.TurnCancelAll(), s.MCPResumeAll(), s.SessionCompactAll()}
		pub = append(pub, mediaWrite()...) // attachments are uploaded first
		sub = []string{s.TurnRejectedAll(), inbox}
	case Reader:
		pub = append(read(events.StreamEvents), mediaRead()...)
		pub = append(pub, read(events.StreamTranscripts)...)
		sub = []string{s.EventsAll(), inbox}
	case Provisioner:
		// The operator: every stream and bucket, and the agent
		// definitions (`llmworker agent put` and rm).
		pub = append([]string{"$JS.API.>"}, bucket(events.BucketAgents)...)
		sub = []string{inbox}
	default:
		panic(fmt.Sprintf("permissions: unknown role %q", role))
	}
	if role != Provisioner && role != Submitter && role != Reader {
		pub = append(pub, info()...)
	}
	return Permissions{Publish: dedupe(pub), Subscribe: dedupe(sub), Responses: responses}
}

func dedupe(s []string) []string {
	slices.Sort(s)
	return slices.Compact(s)
}

// User is one NATS user of Config: a role under a name, authenticated by
// the password in environment variable PasswordEnv when the server reads
// its configuration (nats-server resolves $NAME from the environment).
type User struct {
	Role        Role
	Name        string
	PasswordEnv string
}

// DefaultUsers are one user per role: llmw-<role>, password in
// $LLMW_<ROLE>_PASSWORD.
func DefaultUsers() []User {
	out := make([]User, len(Roles))
	for i, r := range Roles {
		out[i] = User{Role: r, Name: "llmw-" + string(r), PasswordEnv: "LLMW_" + strings.ToUpper(string(r)) + "_PASSWORD"}
	}
	return out
}

// Config renders users as the authorization block of a nats-server
// configuration file, for the installation of prefix.
func Config(prefix string, users []User) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# llmworker roles on the bus (prefix %q): generated by `llmworker permissions`;\n", events.NewSubjects(prefix).P())
	b.WriteString("# docs/security.md says what each may do. Passwords come from the environment\n")
	b.WriteString("# of nats-server when it reads this file.\n")
	b.WriteString("authorization {\n  users = [\n")
	for _, u := range users {
		p := For(u.Role, prefix)
		fmt.Fprintf(&b, "    # %s\n    {\n      user: %q\n      password: $%s\n      permissions: {\n", u.Role, u.Name, u.PasswordEnv)
		fmt.Fprintf(&b, "        publish: { allow: %s }\n", list(p.Publish))
		fmt.Fprintf(&b, "        subscribe: { allow: %s }\n", list(p.Subscribe))
		if p.Responses {
			b.WriteString("        allow_responses: true\n")
		}
		b.WriteString("      }\n    }\n")
	}
	b.WriteString("  ]\n}\n")
	return b.String()
}

// list writes one subject per line, for a reader of the file.
func list(subjects []string) string {
	var b strings.Builder
	b.WriteString("[\n")
	for _, s := range subjects {
		fmt.Fprintf(&b, "          %q,\n", s)
	}
	b.WriteString("        ]")
	return b.String()
}
