package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/mcp"
	"github.com/llmworker/llmworker/pkg/natstest"
	"github.com/llmworker/llmworker/pkg/provision"
	"github.com/llmworker/llmworker/pkg/tool"
	"github.com/llmworker/llmworker/pkg/toolexec"
)

// serverEnv makes the test binary an MCP stdio server instead of running
// the tests: the stdio tests start it as their server.
const serverEnv = "LLMW_MCP_TEST_STDIO_SERVER"

func TestMain(m *testing.M) {
	if os.Getenv(serverEnv) != "" {
		s, _ := newServer()
		if err := s.Run(context.Background(), &sdk.StdioTransport{}); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

type addIn struct {
	A int `json:"a" jsonschema:"the first addend"`
	B int `json:"b" jsonschema:"the second addend"`
}

type addOut struct {
	Sum int `json:"sum"`
}

type textIn struct {
	Text string `json:"text"`
}

// serverState is what the tests read of an in-process server.
type serverState struct {
	calls     atomic.Int64
	started   chan struct{} // a slow call began
	cancelled chan struct{} // a slow call saw its cancellation
}

// newServer is a real MCP server made with the official SDK: add
// (structured output), echo (text), fail (isError), slow (until
// cancelled), and a tool whose name the catalog cannot take as it is.
func newServer() (*sdk.Server, *serverState) {
	st := &serverState{started: make(chan struct{}, 8), cancelled: make(chan struct{}, 8)}
	s := sdk.NewServer(&sdk.Implementation{Name: "test", Version: "1"}, nil)
	sdk.AddTool(s, &sdk.Tool{Name: "add", Description: "Adds two numbers."}, func(ctx context.Context, _ *sdk.CallToolRequest, in addIn) (*sdk.CallToolResult, addOut, error) {
		st.calls.Add(1)
		return nil, addOut{Sum: in.A + in.B}, nil
	})
	sdk.AddTool(s, &sdk.Tool{Name: "echo", Description: "Says it back."}, func(ctx context.Context, _ *sdk.CallToolRequest, in textIn) (*sdk.CallToolResult, any, error) {
		st.calls.Add(1)
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "you said"}, &sdk.TextContent{Text: in.Text}}}, nil, nil
	})
	sdk.AddTool(s, &sdk.Tool{Name: "fail", Description: "Always fails."}, func(ctx context.Context, _ *sdk.CallToolRequest, in textIn) (*sdk.CallToolResult, any, error) {
		st.calls.Add(1)
		return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "the disk is full"}}}, nil, nil
	})
	sdk.AddTool(s, &sdk.Tool{Name: "slow", Description: "Waits to be cancelled."}, func(ctx context.Context, _ *sdk.CallToolRequest, in textIn) (*sdk.CallToolResult, any, error) {
		st.calls.Add(1)
		st.started <- struct{}{}
		<-ctx.Done()
		st.cancelled <- struct{}{}
		return nil, nil, ctx.Err()
	})
	sdk.AddTool(s, &sdk.Tool{Name: "pages", Description: "Reports progress per page."}, func(ctx context.Context, req *sdk.CallToolRequest, in addIn) (*sdk.CallToolResult, any, error) {
		token := req.Params.GetProgressToken()
		for i := 1; i <= in.A; i++ {
			if token != nil {
				_ = req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: token, Progress: float64(i), Total: float64(in.A), Message: "page " + strconv.Itoa(i)})
			}
		}
		// A tool worth reporting progress for takes a while after its
		// last report too (the SDK hands notifications and the response
		// to the client independently: a report racing the response is
		// dropped, as one after the call's end).
		time.Sleep(50 * time.Millisecond)
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "read " + strconv.Itoa(in.A) + " pages"}}}, nil, nil
	})
	sdk.AddTool(s, &sdk.Tool{Name: "crash", Description: "Ends the server's process."}, func(ctx context.Context, _ *sdk.CallToolRequest, in textIn) (*sdk.CallToolResult, any, error) {
		if os.Getenv(serverEnv) != "" {
			os.Exit(3)
		}
		return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "not a subprocess"}}}, nil, nil
	})
	sdk.AddTool(s, &sdk.Tool{Name: "files.read all", Description: "A name with a dot and a space."}, func(ctx context.Context, _ *sdk.CallToolRequest, in textIn) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "read"}}}, nil, nil
	})
	return s, st
}

// httpServerB serves newServer over streamable HTTP, for a benchmark.
func httpServerB(tb testing.TB) (string, *serverState) {
	tb.Helper()
	s, st := newServer()
	srv := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil))
	tb.Cleanup(srv.Close)
	return srv.URL, st
}

// httpServer serves newServer over streamable HTTP for the test; every
// request must carry the header the configuration sets.
func httpServer(t *testing.T) (string, *serverState) {
	t.Helper()
	s, st := newServer()
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer secret" {
			http.Error(w, "no key", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, st
}

func connect(t *testing.T, servers ...mcp.ServerConfig) *mcp.Host {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h, err := mcp.Connect(ctx, servers, mcp.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	return h
}

func stdioServer(t *testing.T, name string) mcp.ServerConfig {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return mcp.ServerConfig{Name: name, Command: []string{exe, "-test.run=^$"}, Env: map[string]string{serverEnv: "1"}}
}

// The tools of a stdio and a streamable-HTTP server, hosted on a toolexec
// replica on NATS and called as a turn calls them: names mcp__NAME__TOOL
// with the server's descriptions and schemas; structured output as JSON,
// text parts joined, isError as the tool's error; input that does not fit
// the schema is refused before it reaches the server; a cancelled call
// reaches the server as a cancellation.
func TestHostedOnToolexec(t *testing.T) {
	url, st := httpServer(t)
	h := connect(t, stdioServer(t, "local"),
		mcp.ServerConfig{Name: "remote", URL: url, Headers: map[string]string{"Authorization": "Bearer secret"}, Timeout: 20 * time.Second})

	var names []string
	for _, tl := range h.Tools() {
		names = append(names, tl.Name())
	}
	// Sorted by the server's names within a server, configuration order
	// across servers.
	want := []string{"mcp__local__add", "mcp__local__crash", "mcp__local__echo", "mcp__local__fail", "mcp__local__files_read_all", "mcp__local__pages", "mcp__local__slow",
		"mcp__remote__add", "mcp__remote__crash", "mcp__remote__echo", "mcp__remote__fail", "mcp__remote__files_read_all", "mcp__remote__pages", "mcp__remote__slow"}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Fatalf("tools %v, want %v", names, want)
	}
	add := h.Tools()[0]
	if add.Description() != "Adds two numbers." || !strings.Contains(string(add.InputSchema()), `"a"`) {
		t.Errorf("add: %q %s", add.Description(), add.InputSchema())
	}

	_, tc, _ := hostOn(t, h)
	n := 0
	call := func(ctx context.Context, name, input string) (events.ToolCallResult, error) {
		n++
		return tc.Call(ctx, events.ToolCallRequest{TurnID: "t1", CallID: "c" + strconv.Itoa(n), Name: name, Input: json.RawMessage(input)}, 0)
	}
	for _, server := range []string{"local", "remote"} {
		ctx := natstest.Context(t)
		for _, c := range []struct {
			tool, input, want string
			isError           bool
		}{
			{"add", `{"a":2,"b":40}`, `{"sum":42}`, false},
			{"echo", `{"text":"hi"}`, "you said\nhi", false},
			{"fail", `{"text":"x"}`, "the disk is full", true},
			{"files_read_all", `{"text":"x"}`, "read", false},
		} {
			res, err := call(ctx, "mcp__"+server+"__"+c.tool, c.input)
			if err != nil {
				t.Fatalf("%s %s: %v", server, c.tool, err)
			}
			if res.Content != c.want || res.IsError != c.isError {
				t.Errorf("%s %s: %q (is_error %v), want %q (%v)", server, c.tool, res.Content, res.IsError, c.want, c.isError)
			}
		}
	}

	// Input that the schema refuses never reaches the server.
	before := st.calls.Load()
	res, err := call(natstest.Context(t), "mcp__remote__add", `{"a":"two","b":40}`)
	if err != nil || !res.IsError || !strings.Contains(res.Content, "a") {
		t.Errorf("invalid input: %+v %v", res, err)
	}
	if st.calls.Load() != before {
		t.Error("the invalid input reached the server")
	}

	// A turn's cancel reaches the server.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := call(ctx, "mcp__remote__slow", `{"text":"x"}`)
		done <- err
	}()
	select {
	case <-st.started:
	case <-time.After(10 * time.Second):
		t.Fatal("the slow call did not start")
	}
	cancel()
	select {
	case <-st.cancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not see the cancellation")
	}
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled call: %v", err)
	}
}

// sink records what Run does to the tools and passes it on to toolexec.
type sink struct {
	srv *toolexec.Server
	mu  sync.Mutex
	log []string
}

func (s *sink) Add(ctx context.Context, tools ...tool.Tool) error {
	s.mu.Lock()
	for _, t := range tools {
		s.log = append(s.log, "+"+t.Name())
	}
	s.mu.Unlock()
	return s.srv.Add(ctx, tools...)
}

func (s *sink) Remove(ctx context.Context, names ...string) error {
	s.mu.Lock()
	for _, n := range names {
		s.log = append(s.log, "-"+n)
	}
	s.mu.Unlock()
	return s.srv.Remove(ctx, names...)
}

func (s *sink) has(entry string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Contains(s.log, entry)
}

// hostOn runs h's tools on a toolexec replica with Run following the
// servers; it returns the replica's recording sink and a client.
func hostOn(t testing.TB, h *mcp.Host) (*sink, *toolexec.Client, *toolexec.Catalog) {
	t.Helper()
	s := natstest.Start(t, natstest.Options{})
	srv, err := toolexec.New(s.NC, toolexec.Config{Provision: provision.Options{Memory: true}})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Register(h.Tools()...); err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	sk := &sink{srv: srv}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		h.Run(ctx, sk)
	}()
	t.Cleanup(func() {
		cancel()
		<-ran
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		_ = srv.Stop(sctx)
	})
	cat, err := toolexec.OpenCatalog(natstest.Context(t), s.JS)
	if err != nil {
		t.Fatal(err)
	}
	return sk, toolexec.NewClient(s.NC, s.JS, toolexec.ClientOptions{}), cat
}

// A server's tools/list_changed reaches the catalog: a tool the server
// adds is hosted and answers, a tool it removes leaves the catalog.
func TestToolListChanged(t *testing.T) {
	s, _ := newServer()
	hs := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil))
	t.Cleanup(hs.Close)
	h := connect(t, mcp.ServerConfig{Name: "remote", URL: hs.URL})
	sk, tc, cat := hostOn(t, h)

	sdk.AddTool(s, &sdk.Tool{Name: "late", Description: "Added later."}, func(ctx context.Context, _ *sdk.CallToolRequest, in textIn) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "late " + in.Text}}}, nil, nil
	})
	natstest.EventuallyWithin(t, 20*time.Second, "the added tool in the catalog", func() bool {
		_, err := cat.Get(natstest.Context(t), "mcp__remote__late")
		return err == nil
	})
	res, err := tc.Call(natstest.Context(t), events.ToolCallRequest{TurnID: "t1", CallID: "c1", Name: "mcp__remote__late", Input: json.RawMessage(`{"text":"hi"}`)}, 0)
	if err != nil || res.Content != "late hi" {
		t.Fatalf("the added tool: %+v %v", res, err)
	}
	s.RemoveTools("echo")
	natstest.EventuallyWithin(t, 20*time.Second, "the removed tool left the catalog", func() bool {
		_, err := cat.Get(natstest.Context(t), "mcp__remote__echo")
		return errors.Is(err, toolexec.ErrNotFound)
	})
	if sk.has("-mcp__remote__add") {
		t.Error("an unchanged tool was removed")
	}
}

// A stdio server that dies is started again: its tools leave the catalog
// while it is down and come back, and they answer again.
func TestCrashedServerIsRestarted(t *testing.T) {
	h := connect(t, stdioServer(t, "local"))
	sk, tc, _ := hostOn(t, h)
	call := func(id, name, input string) (events.ToolCallResult, error) {
		return tc.Call(natstest.Context(t), events.ToolCallRequest{TurnID: "t1", CallID: id, Name: name, Input: json.RawMessage(input)}, 10*time.Second)
	}
	res, err := call("c1", "mcp__local__crash", `{"text":"x"}`)
	if err != nil || !res.IsError {
		t.Fatalf("the crashing call: %+v %v, want an error result", res, err)
	}
	natstest.EventuallyWithin(t, 20*time.Second, "the tools removed and added again", func() bool {
		return sk.has("-mcp__local__echo") && sk.has("+mcp__local__echo")
	})
	res, err = call("c2", "mcp__local__echo", `{"text":"again"}`)
	if err != nil || res.Content != "you said\nagain" {
		t.Fatalf("after the restart: %+v %v", res, err)
	}
}

// An MCP server's notifications/progress for a call reach the caller of
// the call through toolexec (what becomes llmw.tool.progress in a turn):
// throttled, the first and the final report of a burst, before the result.
func TestProgressReachesTheCaller(t *testing.T) {
	url, _ := httpServer(t)
	h := connect(t, mcp.ServerConfig{Name: "remote", URL: url, Headers: map[string]string{"Authorization": "Bearer secret"}})
	_, tc, _ := hostOn(t, h)
	var mu sync.Mutex
	var got []tool.Progress
	ctx := tool.WithProgress(natstest.Context(t), func(p tool.Progress) {
		mu.Lock()
		got = append(got, p)
		mu.Unlock()
	})
	res, err := tc.Call(ctx, events.ToolCallRequest{TurnID: "t1", CallID: "p1", Name: "mcp__remote__pages", Input: json.RawMessage(`{"a":4,"b":0}`)}, 0)
	if err != nil || res.Content != "read 4 pages" {
		t.Fatalf("%+v %v", res, err)
	}
	natstest.Eventually(t, "the final report", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) > 0 && got[len(got)-1].Progress == 4
	})
	mu.Lock()
	defer mu.Unlock()
	if got[0].Progress != 1 || got[0].Total != 4 || got[0].Message != "page 1" || len(got) != 2 {
		t.Fatalf("reports %+v, want the first and the final", got)
	}
}

// A hosted tool's call carries the caller's trace context to the server
// in params._meta, in the W3C traceparent form.
func TestTraceContextReachesTheServer(t *testing.T) {
	s := sdk.NewServer(&sdk.Implementation{Name: "traced", Version: "1"}, nil)
	sdk.AddTool(s, &sdk.Tool{Name: "parent", Description: "Says its traceparent."}, func(ctx context.Context, req *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
		tp, _ := req.Params.Meta["traceparent"].(string)
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: tp}}}, nil, nil
	})
	hs := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil))
	t.Cleanup(hs.Close)
	h := connect(t, mcp.ServerConfig{Name: "traced", URL: hs.URL})
	var parent tool.Tool
	for _, tl := range h.Tools() {
		if tl.Name() == "mcp__traced__parent" {
			parent = tl
		}
	}
	if parent == nil {
		t.Fatal("no mcp__traced__parent")
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:     trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
		TraceFlags: trace.FlagsSampled, Remote: true,
	})
	out, err := parent.Execute(trace.ContextWithRemoteSpanContext(natstest.Context(t), sc), json.RawMessage(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	// The W3C example value (trace-context spec, "traceparent" header).
	if want := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"; out != want {
		t.Fatalf("the server got traceparent %q, want %q", out, want)
	}
}
