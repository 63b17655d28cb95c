package mcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nuid"

	"github.com/llmworker/llmworker/internal/leaf/childenv"
	"github.com/llmworker/llmworker/pkg/telemetry"
	"github.com/llmworker/llmworker/pkg/tool"
)

// Options configure a Host. The zero value works.
type Options struct {
	// Logger receives the servers' stderr lines and connection news (nil
	// = discard).
	Logger *slog.Logger
	// Getenv reads the host's environment for CommandEnv (nil = os.Getenv).
	Getenv func(string) string
	// Version is reported to the servers as the client's version.
	Version string
}

// Host is connected to MCP servers and offers their tools. Its tools are
// safe for concurrent use. Run keeps them current (a server's
// tools/list_changed, a server that died and is restarted); Close ends
// the sessions (a stdio server gets its stdin closed, then SIGTERM).
type Host struct {
	servers []*server
	o       Options
	// stop ends the supervisors of Run; Close calls it.
	stopCtx context.Context
	stop    context.CancelFunc
	// bg counts the goroutines of the sessions (stderr readers, session
	// waiters) and of Run.
	bg sync.WaitGroup
}

// ToolSink is where Run puts the tools that come and go:
// toolexec.Server implements it.
type ToolSink interface {
	Add(ctx context.Context, tools ...tool.Tool) error
	Remove(ctx context.Context, names ...string) error
}

// Connect starts or dials every server, lists its tools and returns the
// host. A server that cannot be reached, or whose tools cannot be listed,
// fails Connect with an error naming it (ErrServer); the servers already
// connected are closed again. Cancelling ctx stops the connecting.
func Connect(ctx context.Context, servers []ServerConfig, o Options) (*Host, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	h := &Host{o: o}
	h.stopCtx, h.stop = context.WithCancel(context.Background())
	for _, c := range servers {
		if err := c.Validate(); err != nil {
			_ = h.Close()
			return nil, err
		}
		srv := &server{h: h, cfg: c, log: o.Logger.With("mcp_server", c.Name), changed: make(chan struct{}, 1)}
		// A command that is no MCP server would never answer initialize.
		sctx, cancel := context.WithTimeout(ctx, connectTimeout)
		err := srv.start(sctx)
		cancel()
		if err != nil {
			_ = h.Close()
			return nil, fmt.Errorf("%w: %q: %w", ErrServer, c.Name, err)
		}
		h.servers = append(h.servers, srv)
		srv.log.Info("mcp server connected", "tools", len(srv.tools))
	}
	return h, nil
}

// Tools returns the servers' tools now, by server in configuration order
// and by name within a server.
func (h *Host) Tools() []tool.Tool {
	var out []tool.Tool
	for _, s := range h.servers {
		out = append(out, s.current()...)
	}
	return out
}

// Run keeps sink's tools of the servers current until ctx ends or Close:
// a server's notifications/tools/list_changed re-lists its tools (the
// tools that went or changed are removed, the new ones added); a server
// whose session ends (a stdio server that exited, an HTTP server that
// stopped answering its keep-alive pings) has its tools removed and is
// started or dialed again, backing off from 100 ms to 30 s between tries,
// and its tools are added once it is back. sink must hold Tools() when Run
// starts. Errors of sink are logged.
func (h *Host) Run(ctx context.Context, sink ToolSink) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(h.stopCtx, cancel)
	defer stop()
	var wg sync.WaitGroup
	for _, s := range h.servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.supervise(ctx, sink)
		}()
	}
	wg.Wait()
}

// Close ends every session and waits for the servers' goroutines; a Run
// returns.
func (h *Host) Close() error {
	h.stop()
	var errs []error
	for _, s := range h.servers {
		if err := s.close(); err != nil {
			errs = append(errs, err)
		}
	}
	h.bg.Wait()
	return errors.Join(errs...)
}

// server is one configured MCP server and its current session.
type server struct {
	h       *Host
	cfg     ServerConfig
	log     *slog.Logger
	changed chan struct{} // tools/list_changed arrived
	// progress routes notifications/progress by progress token to the
	// call that asked for them (tool.ProgressFunc).
	progress sync.Map

	mu    sync.Mutex
	cs    *sdk.ClientSession // nil while down
	ended chan struct{}      // closed when cs ends
	tools []*remoteTool      // by name
}

// start connects and lists the tools.
func (s *server) start(ctx context.Context) error {
	cs, err := s.connect(ctx)
	if err != nil {
		return err
	}
	ended := make(chan struct{})
	s.h.bg.Add(1)
	go func() {
		defer s.h.bg.Done()
		_ = cs.Wait()
		close(ended)
	}()
	tools, err := s.list(ctx, cs)
	if err != nil {
		_ = cs.Close()
		return fmt.Errorf("list tools: %w", err)
	}
	s.mu.Lock()
	if s.h.stopCtx.Err() != nil {
		// Close ran meanwhile: this session is nobody's.
		s.mu.Unlock()
		_ = cs.Close()
		return errClosed
	}
	s.cs, s.ended, s.tools = cs, ended, tools
	s.mu.Unlock()
	return nil
}

// errClosed ends a restart that Close overtook.
var errClosed = errors.New("mcp: host closed")

// stopping reports whether Run's ctx ended or Close began.
func (s *server) stopping(ctx context.Context) bool {
	return ctx.Err() != nil || s.h.stopCtx.Err() != nil
}

func (s *server) session() *sdk.ClientSession {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cs
}

func (s *server) current() []tool.Tool {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]tool.Tool, len(s.tools))
	for i, t := range s.tools {
		out[i] = t
	}
	return out
}

func (s *server) close() error {
	s.mu.Lock()
	cs := s.cs
	s.cs = nil
	s.mu.Unlock()
	if cs == nil {
		return nil
	}
	if err := cs.Close(); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("mcp server %q: %w", s.cfg.Name, err)
	}
	return nil
}

// list reads the server's tools, sorted by name, as remote tools.
func (s *server) list(ctx context.Context, cs *sdk.ClientSession) ([]*remoteTool, error) {
	var listed []*sdk.Tool
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return nil, err
		}
		listed = append(listed, t)
	}
	slices.SortFunc(listed, func(a, b *sdk.Tool) int { return strings.Compare(a.Name, b.Name) })
	taken := map[string]bool{}
	out := make([]*remoteTool, 0, len(listed))
	for _, t := range listed {
		rt, err := newRemoteTool(s, t, ToolName(s.cfg.Name, t.Name, taken))
		if err != nil {
			return nil, fmt.Errorf("tool %q: %w", t.Name, err)
		}
		out = append(out, rt)
	}
	return out, nil
}

// supervise follows the server's session until ctx ends (Run).
func (s *server) supervise(ctx context.Context, sink ToolSink) {
	for {
		s.mu.Lock()
		ended := s.ended
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-s.changed:
			s.refresh(ctx, sink)
		case <-ended:
			if s.stopping(ctx) {
				return
			}
			s.restart(ctx, sink)
		}
	}
}

// refresh re-lists the tools after tools/list_changed and applies the
// difference to sink.
func (s *server) refresh(ctx context.Context, sink ToolSink) {
	cs := s.session()
	if cs == nil {
		return
	}
	tools, err := s.list(ctx, cs)
	if err != nil {
		s.log.Warn("mcp: re-list tools after tools/list_changed", "err", err)
		return
	}
	s.mu.Lock()
	old := s.tools
	s.tools = tools
	s.mu.Unlock()
	was := map[string]*remoteTool{}
	for _, t := range old {
		was[t.name] = t
	}
	var gone []string
	var added []tool.Tool
	for _, t := range tools {
		if o := was[t.name]; o == nil || o.description != t.description || !bytes.Equal(o.schema, t.schema) || o.remote != t.remote || o.eager != t.eager {
			if o != nil {
				gone = append(gone, t.name)
			}
			added = append(added, t)
		}
		delete(was, t.name)
	}
	for n := range was {
		gone = append(gone, n)
	}
	slices.Sort(gone)
	s.apply(ctx, sink, gone, added)
}

// restart removes the tools of a server whose session ended and starts
// it again with backoff; its tools are added once it is back.
func (s *server) restart(ctx context.Context, sink ToolSink) {
	s.mu.Lock()
	old, dead := s.tools, s.cs
	s.cs, s.tools = nil, nil
	s.mu.Unlock()
	if dead != nil {
		_ = dead.Close() // ended already; this releases what it holds
	}
	names := make([]string, len(old))
	for i, t := range old {
		names[i] = t.name
	}
	s.log.Warn("mcp server stopped; its tools leave the catalog until it is back", "tools", names)
	s.apply(ctx, sink, names, nil)
	backoff := 100 * time.Millisecond
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		if s.stopping(ctx) {
			return
		}
		cctx, cancel := context.WithTimeout(ctx, connectTimeout)
		err := s.start(cctx)
		cancel()
		if err == nil {
			break
		}
		if s.stopping(ctx) {
			return
		}
		s.log.Warn("mcp server: restart failed", "err", err, "retry_in", min(2*backoff, 30*time.Second))
		backoff = min(2*backoff, 30*time.Second)
	}
	added := s.current()
	s.log.Info("mcp server restarted", "tools", len(added))
	s.apply(ctx, sink, nil, added)
}

func (s *server) apply(ctx context.Context, sink ToolSink, gone []string, added []tool.Tool) {
	if len(gone) > 0 {
		if err := sink.Remove(ctx, gone...); err != nil {
			s.log.Warn("mcp: remove tools", "tools", gone, "err", err)
		}
	}
	if len(added) > 0 {
		if err := sink.Add(ctx, added...); err != nil {
			s.log.Warn("mcp: add tools", "err", err)
		}
	}
}

func (s *server) connect(ctx context.Context) (*sdk.ClientSession, error) {
	c, o := s.cfg, s.h.o
	var t sdk.Transport
	if c.URL != "" {
		hc := http.DefaultClient
		if len(c.Headers) > 0 {
			hc = &http.Client{Transport: headers{h: c.Headers, next: http.DefaultTransport}}
		}
		t = &sdk.StreamableClientTransport{Endpoint: c.URL, HTTPClient: hc}
	} else {
		cmd := exec.Command(c.Command[0], c.Command[1:]...)
		cmd.Env = childenv.Build(func(k string) (string, bool) {
			v := o.Getenv(k)
			return v, v != ""
		}, c.Env)
		stderr, err := cmd.StderrPipe()
		if err != nil {
			return nil, err
		}
		s.h.bg.Add(1)
		go func() {
			defer s.h.bg.Done()
			logLines(stderr, s.log)
		}()
		t = &sdk.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}
	}
	client := sdk.NewClient(&sdk.Implementation{Name: "llmworker", Version: o.Version}, &sdk.ClientOptions{
		KeepAlive: keepAlive,
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) {
			select {
			case s.changed <- struct{}{}:
			default:
			}
		},
		ProgressNotificationHandler: func(_ context.Context, req *sdk.ProgressNotificationClientRequest) {
			p := req.Params
			if f, ok := s.progress.Load(p.ProgressToken); ok {
				f.(tool.ProgressFunc)(tool.Progress{Progress: p.Progress, Total: p.Total, Message: p.Message})
			}
		},
	})
	cs, err := client.Connect(ctx, t, nil)
	if err != nil {
		if cmd, ok := t.(*sdk.CommandTransport); ok && cmd.Command.Process != nil {
			_ = cmd.Command.Process.Kill() // let the stderr reader end
		}
		return nil, err
	}
	return cs, nil
}

// keepAlive is how often a session pings its server: a server that
// stops answering ends the session, and Run restarts it.
const keepAlive = 5 * time.Second

// connectTimeout bounds starting or dialing a server and listing its
// tools.
const connectTimeout = 30 * time.Second

// logLines logs a stdio server's stderr, a line a record, until it closes.
func logLines(r io.Reader, log *slog.Logger) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	for sc.Scan() {
		log.Info("mcp server stderr", "line", sc.Text())
	}
}

// headers adds fixed headers to every request.
type headers struct {
	h    map[string]string
	next http.RoundTripper
}

func (t headers) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range t.h {
		r.Header.Set(k, v)
	}
	return t.next.RoundTrip(r)
}

// remoteTool is one tool of an MCP server as a tool.Tool.
type remoteTool struct {
	srv         *server
	server      string
	remote      string // the server's name of the tool
	name        string // the catalog's
	description string
	schema      json.RawMessage
	timeout     time.Duration
	eager       bool
}

var (
	_ tool.Tool      = (*remoteTool)(nil)
	_ tool.Timeouter = (*remoteTool)(nil)
	_ tool.Eagerer   = (*remoteTool)(nil)

	_ tool.ContentTool = (*remoteTool)(nil)
)

func newRemoteTool(srv *server, t *sdk.Tool, name string) (*remoteTool, error) {
	c := srv.cfg
	schema := json.RawMessage(`{"type":"object"}`)
	if t.InputSchema != nil {
		b, err := json.Marshal(t.InputSchema)
		if err != nil {
			return nil, fmt.Errorf("input schema: %w", err)
		}
		schema = b
	}
	desc := t.Description
	if desc == "" {
		desc = t.Title
	}
	return &remoteTool{srv: srv, server: c.Name, remote: t.Name, name: name, description: desc, schema: schema, timeout: c.timeout(),
		eager: eager(c, t.Annotations)}, nil
}

// eager says whether calls of a tool with annotations a of server c may
// start while the model still streams: as c.Eager says, else when the
// server says the tool only reads (readOnlyHint) or that a repeated call
// changes nothing more (idempotentHint). A call started early may run
// for nothing (docs/architecture.md, "Tools"), which only such a tool
// allows.
func eager(c ServerConfig, a *sdk.ToolAnnotations) bool {
	if c.Eager != nil {
		return *c.Eager
	}
	return a != nil && (a.ReadOnlyHint || a.IdempotentHint)
}

func (t *remoteTool) Name() string                 { return t.name }
func (t *remoteTool) Description() string          { return t.description }
func (t *remoteTool) InputSchema() json.RawMessage { return t.schema }
func (t *remoteTool) Timeout() time.Duration       { return t.timeout }
func (t *remoteTool) Eager() bool                  { return t.eager }

// Execute calls the tool on its server. Cancelling ctx (the call's
// deadline, a turn's cancel) sends the server notifications/cancelled.
// A result with isError is returned as an error carrying its text, which
// the model reads as the tool's error; a failure to reach the server is
// ErrServer. Execute returns the result's text (ResultText);
// ExecuteContent its parts (ResultContent).
func (t *remoteTool) Execute(ctx context.Context, input json.RawMessage) (string, error) {
	res, err := t.call(ctx, input)
	if err != nil {
		return "", err
	}
	out, err := ResultText(res)
	if err != nil {
		return "", err
	}
	if res.IsError {
		return "", &ToolError{Server: t.server, Tool: t.remote, Text: out}
	}
	return out, nil
}

// ExecuteContent implements tool.ContentTool: Execute, with the images,
// audio and embedded resources of the result as parts (ResultContent).
func (t *remoteTool) ExecuteContent(ctx context.Context, input json.RawMessage) (string, tool.Content, error) {
	res, err := t.call(ctx, input)
	if err != nil {
		return "", nil, err
	}
	out, parts, err := ResultContent(res)
	if err != nil {
		return "", nil, err
	}
	if res.IsError {
		return "", nil, &ToolError{Server: t.server, Tool: t.remote, Text: out}
	}
	return out, parts, nil
}

func (t *remoteTool) call(ctx context.Context, input json.RawMessage) (*sdk.CallToolResult, error) {
	if len(input) == 0 {
		input = json.RawMessage(`{}`)
	}
	cs := t.srv.session()
	if cs == nil {
		return nil, fmt.Errorf("%w: %q is down and being restarted", ErrServer, t.server)
	}
	params := &sdk.CallToolParams{Name: t.remote, Arguments: input}
	// The call's trace context travels in params._meta (the W3C names,
	// as MCP's tracing convention has them), so that a traced server's
	// spans join the turn's trace.
	if tp, ts := telemetry.Parent(ctx); tp != "" {
		params.Meta = sdk.Meta{"traceparent": tp}
		if ts != "" {
			params.Meta["tracestate"] = ts
		}
	}
	if report := tool.ProgressFrom(ctx); report != nil {
		// The server's notifications/progress for this call come with
		// this token.
		token := nuid.Next()
		params.SetProgressToken(token)
		t.srv.progress.Store(token, report)
		defer t.srv.progress.Delete(token)
	}
	res, err := cs.CallTool(ctx, params)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w: %q: tool %q: %w", ErrServer, t.server, t.remote, err)
	}
	return res, nil
}
