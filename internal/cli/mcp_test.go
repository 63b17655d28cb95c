package cli

import (
	"context"
	"encoding/json"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/hook/hooknats"
	"github.com/llmworker/llmworker/pkg/natstest"
	"github.com/llmworker/llmworker/pkg/provision"
	"github.com/llmworker/llmworker/pkg/toolexec"
)

// The official SDK's client against `llmworker mcp` on stdio: it lists the
// catalog, calls a tool that a toolexec replica in another process runs,
// gets a hook's denial as an error result naming the hook, and a call a
// hook paused runs once `llmworker turn resume` approves it.
func TestMCPCommandServesTheCatalog(t *testing.T) {
	s := natstest.Start(t, natstest.Options{})
	ctx := natstest.Context(t)
	url := s.URL()

	// The tools run in another process: this one hosts none.
	replica := startProcess(t, "up", "--services", "toolexec", "--nats-url", url)
	natstest.EventuallyWithin(t, 90*time.Second, "the replica's tools in the catalog", func() bool {
		cat, err := toolexec.OpenCatalog(ctx, s.JS)
		if err != nil {
			return false // the replica provisions the bucket when it starts
		}
		es, err := cat.List(ctx)
		return err == nil && len(es) >= 2
	})
	if t.Failed() {
		t.Fatalf("the replica's output:\n%s", replica.String())
	}

	hooks, err := hooknats.NewServer(s.NC, hooknats.ServerConfig{Provision: provision.Options{Memory: true}, RecheckInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := hooks.HandleFunc(ctx, events.HookRegistration{Name: "no-powers", Event: events.HookBeforeToolCall, Matcher: "^calculator$"},
		func(ctx context.Context, req *events.HookRequest) (*events.HookResponse, error) {
			if strings.Contains(string(req.ToolCall.Input), "^") {
				return hooknats.Respond(events.HookSkip, "no powers on Fridays"), nil
			}
			return hooknats.Respond(events.HookContinue, ""), nil
		}); err != nil {
		t.Fatal(err)
	}
	if err := hooks.HandleFunc(ctx, events.HookRegistration{Name: "clock-approval", Event: events.HookBeforeToolCall, Matcher: "^current_time$"},
		func(ctx context.Context, req *events.HookRequest) (*events.HookResponse, error) {
			return hooknats.Respond(events.HookPause, "a person reads the clock"), nil
		}); err != nil {
		t.Fatal(err)
	}
	if err := hooks.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hooks.Stop(context.Background()) })

	// `llmworker mcp` on a pair of pipes, as an MCP client starts it.
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	stderr := &syncBuffer{}
	code := make(chan int, 1)
	go func() {
		code <- Main(context.Background(), []string{"mcp", "--nats-url", url, "--pause-timeout", "30s"},
			Env{Stdin: inR, Stdout: outW, Stderr: stderr})
		_ = outW.Close()
	}()
	client := sdk.NewClient(&sdk.Implementation{Name: "test-client", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &sdk.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatalf("connect: %v; stderr:\n%s", err, stderr.String())
	}

	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range list.Tools {
		names = append(names, tl.Name)
	}
	if !slices.Contains(names, "calculator") || !slices.Contains(names, "current_time") {
		t.Fatalf("tools %v, want the replica's calculator and current_time", names)
	}

	r, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "calculator", Arguments: map[string]any{"expression": "(2 + 3) * 4"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := resultText(r); r.IsError || got != "20" {
		t.Fatalf("calculator: error=%v %q, want 20", r.IsError, got)
	}

	r, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: "calculator", Arguments: map[string]any{"expression": "2 ^ 10"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := resultText(r); !r.IsError || !strings.Contains(got, `"no-powers"`) || !strings.Contains(got, "no powers on Fridays") || strings.Contains(got, "1024") {
		t.Fatalf("denied call: error=%v %q, want an error naming hook no-powers, without a result", r.IsError, got)
	}

	// The pause is an event like a turn's; turn resume finds it there and
	// sends the decision to the gateway holding the call.
	paused := make(chan *nats.Msg, 16)
	sub, err := s.NC.ChanSubscribe(events.NewSubjects("").EventsAll(), paused)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	res := make(chan *sdk.CallToolResult, 1)
	go func() {
		r, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "current_time", Arguments: map[string]any{"timezone": "Asia/Tokyo"}})
		if err != nil {
			r = &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: err.Error()}}}
		}
		res <- r
	}()
	var turnID string
	for turnID == "" {
		select {
		case m := <-paused:
			if env, err := events.DecodeEnvelope(m.Header, m.Data); err == nil && env.Type == events.TypeTurnPaused {
				turnID = env.TurnID
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("no llmw.turn.paused; stderr:\n%s", stderr.String())
		}
	}
	var out, errOut syncBuffer
	if c := Main(ctx, []string{"turn", "resume", turnID, "--approve", "1", "--nats-url", url}, Env{Stdout: &out, Stderr: &errOut}); c != 0 {
		t.Fatalf("turn resume exited %d: %s%s", c, out.String(), errOut.String())
	}
	r = <-res
	var now struct {
		Timezone string `json:"timezone"`
		Unix     int64  `json:"unix"`
	}
	if err := json.Unmarshal([]byte(resultText(r)), &now); r.IsError || err != nil || now.Timezone != "Asia/Tokyo" || now.Unix == 0 {
		t.Fatalf("approved call: error=%v %q", r.IsError, resultText(r))
	}

	// Resuming again is refused with the reason, not sent into the void.
	errOut = syncBuffer{}
	if c := Main(ctx, []string{"turn", "resume", turnID, "--approve", "1", "--nats-url", url}, Env{Stdout: &out, Stderr: &errOut}); c == 0 {
		t.Fatalf("a second resume of a settled call succeeded: %s", out.String())
	}

	// The client closing stdin ends the command cleanly.
	_ = cs.Close()
	_ = inW.Close()
	select {
	case c := <-code:
		if c != 0 {
			t.Fatalf("llmworker mcp exited %d; stderr:\n%s", c, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("llmworker mcp did not end when its client closed stdin")
	}
}

func resultText(r *sdk.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// `llmworker mcp` refuses what cannot work before it serves.
func TestMCPCommandUsage(t *testing.T) {
	for _, args := range [][]string{
		{"mcp"}, // no NATS URL
		{"mcp", "--nats-url", "nats://127.0.0.1:1", "extra"},
		{"mcp", "--nats-url", "nats://127.0.0.1:1", "--log-level", "loud"},
	} {
		var out, errOut syncBuffer
		if c := Main(context.Background(), args, Env{Stdout: &out, Stderr: &errOut, Getenv: func(string) string { return "" }}); c != 2 {
			t.Errorf("%v: exit %d, want 2 (usage); stderr %q", args, c, errOut.String())
		}
	}
}
