// Package mcp hosts the tools of MCP servers (Model Context Protocol,
// through the official Go SDK) as llmworker tools, so that toolexec
// replicas run them from the durable tool-call queue like any other tool.
//
// # Servers
//
// A ServerConfig names a stdio server (a command the host starts, with a
// minimal environment: CommandEnv plus its own Env) or a streamable-HTTP
// server (a URL, with fixed headers). toolexec and `llmworker up` take
// them as `--mcp NAME=COMMAND ARGS…`, `--mcp NAME=https://…` (repeatable)
// and `--mcp-config FILE` (File, YAML); an invalid entry is refused at
// start with the entry and what is wrong.
//
// # Tools
//
// Connect lists each server's tools. Each becomes a tool named
// mcp__<server>__<tool> (ToolName says how names that do not fit the
// catalog's rule are mapped), with the server's description and input
// schema; toolexec validates every call's input against that schema
// before it reaches the server. Execute maps the result (ResultText):
// structuredContent as JSON, else the content parts joined; isError
// becomes the tool's error, which the model reads. The tools are
// tool.ContentTools: ExecuteContent (ResultContent) gives a result with
// images, audio or blob resources as parts (image and file parts), which
// the model sees as they are. A Gateway answers a result of parts with
// ImageContent, blob EmbeddedResources and text. A call's deadline
// (ServerConfig.Timeout) and a turn's cancel cancel the request, which
// the SDK sends to the server as notifications/cancelled. A tool the
// server annotates readOnlyHint or idempotentHint is a tool.Eagerer that
// says yes (its calls may start while the model streams, the catalog's
// eager); any other says no; ServerConfig.Eager decides for all of a
// server's tools instead.
//
// # Following the servers
//
// Host.Run keeps a ToolSink (a toolexec.Server) current: a server's
// notifications/tools/list_changed re-lists its tools; a server whose
// session ends (a stdio server that exited, an HTTP server that stops
// answering keep-alive pings) has its tools removed and is restarted
// with backoff, and its tools are added again once it is back.
//
// A call's notifications/progress (asked for with a progress token when
// the call's context has a tool.ProgressFunc) become its progress
// reports: llmw.tool.progress events in a turn.
//
// # Serving the catalog: the gateway
//
// A Gateway is the other direction: an MCP server (Server, ServeStdio,
// Handler) whose tools are the catalog's (KV LLMW_TOOLS), kept current
// with notifications/tools/list_changed. Each tools/call runs the
// installation's before_tool_call hooks, then the call on a toolexec
// replica (toolexec.Client: durable, answered once), then the
// after_tool_call hooks, and records its steps as worker events under a
// turn id of its own (mcp-<nuid>). A call a hook refuses is an MCP error
// result naming the hook; a call a hook pauses waits for Resume (what
// `llmworker turn resume` sends to P.mcp.resume.<turn_id>) up to
// GatewayConfig.PauseTimeout. `llmworker mcp` runs one on stdio or
// streamable HTTP (docs/protocol.md §6, "The MCP gateway").
package mcp
