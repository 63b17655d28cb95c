package mcp

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/llmworker/llmworker/internal/leaf/version"
	"github.com/llmworker/llmworker/pkg/cenats"
	"github.com/llmworker/llmworker/pkg/emit"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/hook"
	"github.com/llmworker/llmworker/pkg/hook/hooknats"
	"github.com/llmworker/llmworker/pkg/telemetry"
	"github.com/llmworker/llmworker/pkg/tool"
	"github.com/llmworker/llmworker/pkg/toolexec"
)

// Defaults of GatewayConfig.
const (
	// DefaultPauseTimeout is how long a call that a before_tool_call hook
	// paused waits for its resume before it fails.
	DefaultPauseTimeout = 10 * time.Minute
	// GatewayService is the service name in the events' source
	// (/llmw/mcp/<instance>), which tells `llmworker turn resume` that a
	// pause belongs to an MCP gateway.
	GatewayService = "mcp"
	// progressEvery bounds the progress reports of one call, as in turns.
	progressEvery = 200 * time.Millisecond
)

// GatewayConfig configures a Gateway. The zero value works.
type GatewayConfig struct {
	// Prefix is the subject prefix P.
	Prefix string
	// Instance names this gateway in its events' source
	// (/llmw/mcp/<instance>; "" = random).
	Instance string
	// SessionID is the session of the calls' events ("" =
	// events.NoSession).
	SessionID string
	// PauseTimeout bounds the wait of a paused call for its resume (0 =
	// DefaultPauseTimeout).
	PauseTimeout time.Duration
	// Logger receives what goes wrong outside a call (nil = slog.Default).
	Logger *slog.Logger
}

// Gateway serves the tool catalog (KV LLMW_TOOLS) to MCP clients: every
// catalog tool is an MCP tool of the same name, and a tools/call runs on
// a toolexec replica behind the installation's before_tool_call and
// after_tool_call hooks (docs/architecture.md, "The MCP gateway"). It is
// safe for concurrent use; one Gateway serves any number of MCP sessions.
type Gateway struct {
	nc      *nats.Conn
	cfg     GatewayConfig
	log     *slog.Logger
	subj    events.Subjects
	source  string
	server  *sdk.Server
	catalog *toolexec.CatalogWatcher
	chain   *hook.Chain
	hooks   *hooknats.Watcher
	client  *toolexec.Client
	pub     *emit.Publisher
	resume  *nats.Subscription
	cancel  context.CancelFunc
	synced  chan struct{} // closed when the catalog sync goroutine ends

	mu     sync.Mutex
	served map[string]events.ToolCatalogEntry // the tools the MCP server lists
	paused map[string]*pausedCall             // by turn id
	calls  sync.WaitGroup
	closed bool
}

// pausedCall is a call waiting for its resume.
type pausedCall struct {
	callID string
	answer chan events.Decision
}

// NewGateway loads the catalog and the hook registry, subscribes to
// P.mcp.resume.* and returns a Gateway that keeps its MCP tool list in
// step with the catalog until Close. js must be a JetStream context of nc
// (toolexec.NewClient says why). ctx bounds the loading only.
func NewGateway(ctx context.Context, nc *nats.Conn, js jetstream.JetStream, cfg GatewayConfig) (*Gateway, error) {
	if cfg.Instance == "" {
		cfg.Instance = nuid.Next()
	}
	if cfg.SessionID == "" {
		cfg.SessionID = events.NoSession
	}
	if !events.ValidToken(cfg.SessionID) {
		return nil, fmt.Errorf("%w: session id %q is not a NATS subject token", ErrConfig, cfg.SessionID)
	}
	if cfg.PauseTimeout <= 0 {
		cfg.PauseTimeout = DefaultPauseTimeout
	}
	g := &Gateway{
		nc: nc, cfg: cfg, log: cfg.Logger, subj: events.NewSubjects(cfg.Prefix),
		source: events.Source(GatewayService, cfg.Instance),
		chain:  &hook.Chain{}, served: map[string]events.ToolCatalogEntry{}, paused: map[string]*pausedCall{},
		synced: make(chan struct{}),
	}
	if g.log == nil {
		g.log = slog.Default()
	}
	g.client = toolexec.NewClient(nc, js, toolexec.ClientOptions{Prefix: cfg.Prefix, Source: g.source, Logger: g.log})
	g.pub = emit.NewPublisher(nc, emit.PublisherOptions{Prefix: cfg.Prefix, Service: GatewayService, Instance: cfg.Instance})
	g.server = sdk.NewServer(&sdk.Implementation{Name: "llmworker", Title: "llmworker tool catalog", Version: version.String()},
		&sdk.ServerOptions{Logger: g.log, HasTools: true})

	// The watches live until Close, not as long as ctx.
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	g.cancel = cancel
	cat, err := toolexec.OpenCatalog(ctx, js)
	if err == nil {
		g.catalog, err = cat.Watch(wctx)
	}
	if err != nil {
		cancel()
		return nil, fmt.Errorf("mcp gateway: tool catalog: %w", err)
	}
	g.hooks, err = hooknats.Watch(wctx, js, g.chain, hooknats.WatchOptions{
		Config: hooknats.Config{Source: g.source}, Logger: g.log.With("component", "hooks"),
	})
	if err != nil {
		cancel()
		_ = g.catalog.Stop()
		return nil, fmt.Errorf("mcp gateway: hook registry: %w", err)
	}
	g.resume, err = nc.Subscribe(g.subj.MCPResumeAll(), g.onResume)
	if err == nil {
		err = nc.FlushTimeout(5 * time.Second)
	}
	if err != nil {
		cancel()
		_ = g.catalog.Stop()
		_ = g.hooks.Stop()
		return nil, fmt.Errorf("mcp gateway: subscribe %s: %w", g.subj.MCPResumeAll(), err)
	}
	g.sync()
	go g.follow(wctx)
	return g, nil
}

// Server is the MCP server; connect it to any transport (Server.Run,
// ServeStdio, Handler).
func (g *Gateway) Server() *sdk.Server { return g.server }

// ServeStdio serves one MCP session over newline-delimited JSON-RPC on r
// and w (a process's stdin and stdout) until the client closes it or ctx
// ends.
func (g *Gateway) ServeStdio(ctx context.Context, r io.ReadCloser, w io.WriteCloser) error {
	err := g.server.Run(ctx, &sdk.IOTransport{Reader: r, Writer: w})
	if errors.Is(err, io.EOF) || (err != nil && ctx.Err() != nil) {
		return nil
	}
	return err
}

// Handler serves MCP sessions over the streamable HTTP transport.
func (g *Gateway) Handler() http.Handler {
	return sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return g.server }, nil)
}

// BearerAuth answers 401 to a request whose Authorization header is not
// "Bearer <token>" and passes the others to next: the streamable HTTP
// transport of a gateway reachable by more than its own host's users
// (the tools it serves are the installation's). The comparison takes the
// same time whatever the header.
func BearerAuth(token string, next http.Handler) http.Handler {
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="llmworker mcp"`)
			http.Error(w, "llmworker mcp: missing or wrong bearer token", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Close stops following the catalog and the hooks, fails the paused
// calls, and waits for the calls in flight until ctx ends (they run to
// their result: a toolexec call is not dropped halfway).
func (g *Gateway) Close(ctx context.Context) error {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil
	}
	g.closed = true
	for _, p := range g.paused {
		close(p.answer)
	}
	g.mu.Unlock()
	err := g.resume.Unsubscribe()
	done := make(chan struct{})
	go func() { g.calls.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		err = errors.Join(err, fmt.Errorf("mcp gateway: calls still running: %w", ctx.Err()))
	}
	err = errors.Join(err, g.catalog.Stop(), g.hooks.Stop())
	g.cancel()
	<-g.synced
	return err
}

// follow keeps the MCP tool list in step with the catalog; the SDK tells
// the clients with notifications/tools/list_changed.
func (g *Gateway) follow(ctx context.Context) {
	defer close(g.synced)
	for {
		select {
		case <-ctx.Done():
			return
		case <-g.catalog.Changed():
			g.sync()
		}
	}
}

// sync makes the MCP server list exactly the catalog's tools.
func (g *Gateway) sync() {
	want := map[string]events.ToolCatalogEntry{}
	for _, e := range g.catalog.Entries() {
		want[e.Name] = e
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	var gone []string
	for name := range g.served {
		if _, ok := want[name]; !ok {
			gone = append(gone, name)
			delete(g.served, name)
		}
	}
	if len(gone) > 0 {
		g.server.RemoveTools(gone...)
	}
	for name, e := range want {
		if old, ok := g.served[name]; ok && sameEntry(old, e) {
			continue
		}
		if err := g.add(e); err != nil {
			g.log.Warn("mcp gateway: catalog tool not served", "tool", name, "err", err)
			continue
		}
		g.served[name] = e
	}
}

func sameEntry(a, b events.ToolCatalogEntry) bool {
	return a.Description == b.Description && string(a.InputSchema) == string(b.InputSchema) &&
		a.TimeoutMS == b.TimeoutMS && a.Version == b.Version
}

// add serves one catalog tool; the SDK panics on a schema that is not an
// object, which the catalog should never hold, but a foreign writer could.
func (g *Gateway) add(e events.ToolCatalogEntry) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	schema := e.InputSchema
	if len(schema) == 0 {
		schema = json.RawMessage(`{"type":"object"}`)
	}
	g.server.AddTool(&sdk.Tool{Name: e.Name, Description: e.Description, InputSchema: schema},
		func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return g.call(ctx, req)
		})
	return nil
}

// gatewayCall is one tools/call: its own turn id (the calls of the
// gateway are not turns of the turn service, but hooks, toolexec and the
// event stream identify work by turn and call) and its event publisher.
type gatewayCall struct {
	g     *Gateway
	turn  *hook.Turn
	call  events.ToolCall
	entry events.ToolCatalogEntry
	ep    *emit.EventPublisher
}

// call is a tools/call's life: decode → gate (before_tool_call, a pause
// waits for its resume) → run on toolexec → settle (after_tool_call) →
// record (llmw.tool.* events) → answer. Every refusal is an MCP error
// result naming what refused it; the call is never run after a refusal.
func (g *Gateway) call(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil, ErrGatewayClosed
	}
	g.calls.Add(1)
	g.mu.Unlock()
	defer g.calls.Done()

	c, refusal := g.decode(req)
	if refusal != "" {
		return errorResult(refusal), nil
	}
	ctx = traceFrom(ctx, req.Params.Meta)
	defer func() { _ = c.ep.Flush(context.WithoutCancel(ctx)) }()
	if refusal := c.gate(ctx); refusal != "" {
		return errorResult(refusal), nil
	}
	res := c.run(ctx, req)
	c.settle(ctx, &res)
	c.record(events.ToolCallResult{CallID: c.call.ID, TurnID: c.turn.ID, Name: c.call.Name, Content: res.Content, Parts: res.Parts, IsError: res.IsError})
	return &sdk.CallToolResult{Content: mcpContent(res), IsError: res.IsError}, nil
}

// mcpContent is a result's content as MCP content: its text, or its parts
// with images as ImageContent and files as an EmbeddedResource blob of
// their media type (a part with a URL or an LLMW_MEDIA ref, whose bytes
// the gateway does not hold, as a ResourceLink to it).
func mcpContent(res events.ToolResult) []sdk.Content {
	if res.Parts == nil {
		return []sdk.Content{&sdk.TextContent{Text: res.Content}}
	}
	out := make([]sdk.Content, 0, len(res.Parts))
	for i := range res.Parts {
		p := &res.Parts[i]
		if p.Type == events.PartText {
			out = append(out, &sdk.TextContent{Text: p.Text})
			continue
		}
		b, err := p.Bytes()
		switch {
		case err != nil:
			out = append(out, &sdk.TextContent{Text: fmt.Sprintf("[%s %s: %v]", p.Type, p.MediaType, err)})
		case b == nil:
			uri := p.URL
			if uri == "" {
				uri = "llmw-media:" + p.Ref
			}
			name := p.Filename
			if name == "" {
				name = string(p.Type)
			}
			out = append(out, &sdk.ResourceLink{URI: uri, Name: name, MIMEType: p.MediaType})
		case p.Type == events.PartImage:
			out = append(out, &sdk.ImageContent{Data: b, MIMEType: p.MediaType})
		default:
			name := p.Filename
			if name == "" {
				name = "file"
			}
			out = append(out, &sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "llmw-result:" + name, MIMEType: p.MediaType, Blob: b}})
		}
	}
	return out
}

// decode finds the catalog tool and gives the call its ids.
func (g *Gateway) decode(req *sdk.CallToolRequest) (*gatewayCall, string) {
	name := req.Params.Name
	entry, ok := g.catalog.Get(name)
	if !ok {
		return nil, fmt.Sprintf("unknown tool %q: the tool catalog has no such tool", name)
	}
	input := req.Params.Arguments
	if len(input) == 0 || string(input) == "null" {
		input = json.RawMessage(`{}`)
	}
	turnID := "mcp-" + nuid.Next()
	c := &gatewayCall{
		g: g, entry: entry,
		call: events.ToolCall{ID: "call-" + nuid.Next(), Name: name, Input: input},
		ep:   g.pub.Turn(turnID, g.cfg.SessionID, emit.Position{}),
	}
	c.turn = &hook.Turn{ID: turnID, SessionID: g.cfg.SessionID, Step: 1, Observer: hook.ObserverFuncs{
		Decision: func(d events.HookDecision) { c.record(d) },
		Message:  func(m events.HookMessage) { c.record(m) },
	}}
	return c, ""
}

// record publishes a worker event of the call (best effort: the answer to
// the MCP client does not wait for the event stream).
func (c *gatewayCall) record(ev events.WorkerEvent) {
	if _, err := c.ep.Publish(ev); err != nil {
		c.g.log.Debug("mcp gateway: event not published", "turn", c.turn.ID, "type", ev.WorkerType(), "err", err)
	}
}

// gate runs the before_tool_call hooks; a non-empty refusal is the error
// result the client gets instead of a run.
func (c *gatewayCall) gate(ctx context.Context) string {
	in := &hook.ToolCallInput{Turn: c.turn, Call: c.call, Tool: c.entry.Definition()}
	out := c.g.chain.RunBeforeToolCall(ctx, in)
	name := c.call.Name
	switch {
	case out.Failed:
		return c.skip(out.Hook, fmt.Sprintf("the call of tool %q was refused: before_tool_call hook %q failed: %v", name, out.Hook, out.Err))
	case out.Result.Action == hook.ToolSkip:
		return c.skip(out.Hook, fmt.Sprintf("the call of tool %q was denied by hook %q%s", name, out.Hook, suffix(out.Result.Reason)))
	case out.Result.Action == hook.ToolAbort:
		return c.skip(out.Hook, fmt.Sprintf("the call of tool %q was aborted by hook %q%s", name, out.Hook, suffix(out.Result.Reason)))
	case out.Result.Action == hook.ToolPause:
		d, refusal := c.pause(ctx, out.Hook, out.Result.Reason)
		if refusal != "" {
			return c.skip(out.Hook, refusal)
		}
		switch d.Kind {
		case events.DecisionDeny:
			return c.skip(out.Hook, fmt.Sprintf("the call of tool %q, paused by hook %q, was denied at its resume%s", name, out.Hook, suffix(d.Reason)))
		case events.DecisionEdit:
			in.Call.Input = d.Input
		}
	}
	c.call.Input = in.Call.Input // a hook may rewrite the input, not the tool or the id
	if len(c.call.Input) == 0 {
		c.call.Input = json.RawMessage(`{}`)
	}
	return ""
}

func (c *gatewayCall) skip(hookName, reason string) string {
	c.record(events.ToolSkipped{CallID: c.call.ID, Name: c.call.Name, Hook: hookName, Reason: reason})
	return reason
}

// pause publishes llmw.turn.paused with the call pending and waits for a
// resume on P.mcp.resume.<turn_id>, for PauseTimeout at most.
func (c *gatewayCall) pause(ctx context.Context, hookName, reason string) (events.Decision, string) {
	g := c.g
	p := &pausedCall{callID: c.call.ID, answer: make(chan events.Decision, 1)}
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return events.Decision{}, fmt.Sprintf("the call of tool %q was paused by hook %q, and the MCP gateway is shutting down", c.call.Name, hookName)
	}
	g.paused[c.turn.ID] = p
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		delete(g.paused, c.turn.ID)
		g.mu.Unlock()
	}()
	c.record(events.TurnPaused{Reason: reason, Hook: hookName, Pending: []events.ToolCall{c.call}})
	// The pause is stored before anyone can find it and resume.
	if err := c.ep.Flush(ctx); err != nil {
		g.log.Warn("mcp gateway: pause not recorded", "turn", c.turn.ID, "err", err)
	}
	g.log.Info("mcp gateway: call paused", "turn", c.turn.ID, "call", c.call.ID, "tool", c.call.Name, "hook", hookName)
	t := time.NewTimer(g.cfg.PauseTimeout)
	defer t.Stop()
	select {
	case d, ok := <-p.answer:
		if !ok {
			return d, fmt.Sprintf("the call of tool %q was paused by hook %q, and the MCP gateway stopped before its resume", c.call.Name, hookName)
		}
		c.record(events.TurnResumed{Decisions: map[string]events.Decision{c.call.ID: d}})
		return d, ""
	case <-t.C:
		return events.Decision{}, fmt.Sprintf("the call of tool %q was paused by hook %q and not resumed within %s (resume it with `llmworker turn resume %s`)",
			c.call.Name, hookName, g.cfg.PauseTimeout, c.turn.ID)
	case <-ctx.Done():
		return events.Decision{}, fmt.Sprintf("the call of tool %q was paused by hook %q and cancelled by the client", c.call.Name, hookName)
	}
}

// run sends the call to toolexec and forwards its progress to the client
// (when it asked with a progress token) and to the event stream.
func (c *gatewayCall) run(ctx context.Context, req *sdk.CallToolRequest) events.ToolResult {
	c.record(events.ToolStarted{CallID: c.call.ID, Name: c.call.Name, Input: c.call.Input})
	token := req.Params.GetProgressToken()
	report, stop := tool.Throttle(func(p tool.Progress) {
		c.record(events.ToolProgress{CallID: c.call.ID, Name: c.call.Name, Progress: p.Progress, Total: p.Total, Message: p.Message})
		if token != nil && req.Session != nil {
			_ = req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{
				ProgressToken: token, Progress: p.Progress, Total: p.Total, Message: p.Message})
		}
	}, progressEvery)
	defer stop()
	r, err := c.g.client.Call(tool.WithProgress(ctx, report), events.ToolCallRequest{
		CallID: c.call.ID, TurnID: c.turn.ID, SessionID: c.turn.SessionID, Name: c.call.Name, Input: c.call.Input,
	}, time.Duration(c.entry.TimeoutMS)*time.Millisecond)
	if err != nil {
		return events.ToolResult{ToolUseID: c.call.ID, Content: fmt.Sprintf("the call of tool %q failed: %v", c.call.Name, err), IsError: true}
	}
	return events.ToolResult{ToolUseID: c.call.ID, Content: r.Content, Parts: r.Parts, IsError: r.IsError}
}

// settle runs the after_tool_call hooks on the result; a refusal replaces
// the result (the client must not get what a hook withheld).
func (c *gatewayCall) settle(ctx context.Context, res *events.ToolResult) {
	in := &hook.ToolResultInput{Turn: c.turn, Call: c.call, Result: *res, Tool: c.entry.Definition()}
	out := c.g.chain.RunAfterToolCall(ctx, in)
	switch {
	case out.Failed:
		*res = events.ToolResult{ToolUseID: c.call.ID, IsError: true,
			Content: fmt.Sprintf("the result of tool %q was withheld: after_tool_call hook %q failed: %v", c.call.Name, out.Hook, out.Err)}
	case out.Result.Action == hook.ResultAbort:
		*res = events.ToolResult{ToolUseID: c.call.ID, IsError: true,
			Content: fmt.Sprintf("the result of tool %q was withheld by hook %q%s", c.call.Name, out.Hook, suffix(out.Result.Reason))}
	default:
		*res = in.Result
	}
}

// onResume takes a resume of a paused call. Only the gateway holding the
// call answers, so a request that no gateway holds times out at the
// caller (Resume says so).
func (g *Gateway) onResume(m *nats.Msg) {
	turnID := events.LastToken(m.Subject)
	g.mu.Lock()
	p, ok := g.paused[turnID]
	g.mu.Unlock()
	if !ok {
		return
	}
	req, err := decodeResume(m)
	if err == nil && req.TurnID != turnID {
		err = fmt.Errorf("turn_id %q does not match the subject's %q", req.TurnID, turnID)
	}
	var d events.Decision
	if err == nil {
		var found bool
		if d, found = req.Decisions[p.callID]; !found {
			err = fmt.Errorf("no decision for the paused call %s", p.callID)
		}
	}
	if err == nil && d.Kind == events.DecisionEdit && !json.Valid(d.Input) {
		err = fmt.Errorf("decision for call %s: edited input is not JSON", p.callID)
	}
	if err == nil {
		g.mu.Lock()
		if _, still := g.paused[turnID]; !still || g.closed {
			err = fmt.Errorf("turn %s is no longer paused", turnID)
		} else {
			delete(g.paused, turnID)
			p.answer <- d
		}
		g.mu.Unlock()
	}
	reply := resumeReply{OK: err == nil}
	if err != nil {
		reply.Error = err.Error()
	}
	b, _ := json.Marshal(reply)
	_ = m.Respond(b)
}

func decodeResume(m *nats.Msg) (events.ResumeRequest, error) {
	env, err := events.DecodeEnvelope(m.Header, m.Data)
	if err != nil {
		return events.ResumeRequest{}, err
	}
	if env.Type != events.TypeTurnResume {
		return events.ResumeRequest{}, fmt.Errorf("type %q, want %q", env.Type, events.TypeTurnResume)
	}
	return events.DecodeData[events.ResumeRequest](env)
}

// resumeReply is the gateway's answer on P.mcp.resume.<turn_id>.
type resumeReply struct {
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
}

// PausedByGateway reports whether a llmw.turn.paused event of source
// came from an MCP gateway, whose resume goes to Resume rather than to
// the turn service.
func PausedByGateway(source string) bool {
	return strings.HasPrefix(source, "/llmw/"+GatewayService+"/")
}

// Resume sends req to the MCP gateway holding its paused call
// (P.mcp.resume.<turn_id>) and returns once the gateway took it. A gateway
// that holds no such call does not answer: ErrNotPaused after timeout.
func Resume(ctx context.Context, nc *nats.Conn, prefix, source string, req events.ResumeRequest, timeout time.Duration) error {
	if !events.ValidToken(req.TurnID) {
		return fmt.Errorf("%w: turn id %q", ErrNotPaused, req.TurnID)
	}
	env, err := events.NewEnvelope(source, events.TypeTurnResume, req)
	if err != nil {
		return err
	}
	env.Subject, env.TurnID = req.TurnID, req.TurnID
	subject := events.NewSubjects(prefix).MCPResume(req.TurnID)
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	m, err := nc.RequestMsgWithContext(rctx, cenats.NewMsg(subject, env))
	switch {
	case errors.Is(err, nats.ErrNoResponders), errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		return fmt.Errorf("%w: no MCP gateway holds a paused call of turn %s (it may have timed out)", ErrNotPaused, req.TurnID)
	case err != nil:
		return fmt.Errorf("mcp: resume turn %s: %w", req.TurnID, err)
	}
	var r resumeReply
	if err := json.Unmarshal(m.Data, &r); err != nil {
		return fmt.Errorf("mcp: resume turn %s: gateway answered %q: %w", req.TurnID, m.Data, err)
	}
	if !r.OK {
		return fmt.Errorf("%w: turn %s: %s", ErrResumeRefused, req.TurnID, r.Error)
	}
	return nil
}

// traceFrom continues the client's trace: the traceparent and tracestate
// of the request's _meta become the parent of the call's spans and
// travel on with the call (toolexec's CloudEvent).
func traceFrom(ctx context.Context, meta sdk.Meta) context.Context {
	tp, _ := meta["traceparent"].(string)
	if tp == "" {
		return ctx
	}
	ts, _ := meta["tracestate"].(string)
	return telemetry.Extract(ctx, &events.Envelope{TraceParent: tp, TraceState: ts})
}

func errorResult(text string) *sdk.CallToolResult {
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: text}}, IsError: true}
}

func suffix(reason string) string {
	if reason == "" {
		return ""
	}
	return ": " + reason
}
