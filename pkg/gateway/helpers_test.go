package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/llmworker/llmworker/internal/cli"
	"github.com/llmworker/llmworker/internal/leaf/fixtures"
	"github.com/llmworker/llmworker/internal/replay"
	"github.com/llmworker/llmworker/internal/service/hookbridgesvc"
	"github.com/llmworker/llmworker/internal/service/ingestsvc"
	"github.com/llmworker/llmworker/internal/service/toolexecsvc"
	"github.com/llmworker/llmworker/internal/service/turnsvc"
	"github.com/llmworker/llmworker/pkg/gateway"
	"github.com/llmworker/llmworker/pkg/ingest"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/llm/llmtest"
	"github.com/llmworker/llmworker/pkg/natstest"
)

func TestMain(m *testing.M) {
	// The genai SDK's dependencies (through the stack's ingest) start an
	// opencensus worker in an init function; it is not ours. Nor is the
	// event broker a2a-go's a2asrv (the remote agent of remote_test.go)
	// can leave behind: its task manager destroys a finished task's event
	// queue before it forgets the task, and a SubscribeToTask in between
	// creates a queue nobody destroys.
	goleak.VerifyTestMain(m, append(natstest.NotOurGoroutines(),
		goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"),
		goleak.IgnoreTopFunction("github.com/a2aproject/a2a-go/v2/a2asrv/eventqueue.newInMemoryEventBroker.func1"))...)
}

// stackOpts say what a test stack runs.
type stackOpts struct {
	// approve pauses every call of this tool for approval ("" = none).
	approve string
	// pace slows the replayed streams per recorded event.
	pace time.Duration
	// script, when set, answers the models "script:<any>" beside the
	// replay models.
	script *llmtest.Scripted
	// toolDelay makes every demo tool call take this long.
	toolDelay time.Duration
	// turn configures the turn service (models file, compaction).
	turn turnsvc.Options
	// provider, when set, answers the models "script:<any>" instead of
	// script.
	provider llm.Provider
	// providers answer the models "<key>:<any>" beside the replay models.
	providers map[string]llm.Provider
	// noTurn leaves the turn service out (startTurns runs replicas).
	noTurn bool
}

// startStack runs NATS and the services with the replay models and demo
// tools, as `llmworker up --replay` does, without a gateway.
func startStack(t *testing.T, o stackOpts) *cli.Stack {
	t.Helper()
	cfg := cli.StackConfig{
		Services: []string{cli.SvcIngest, cli.SvcToolexec, cli.SvcHookbridge, cli.SvcTurn},
		Getenv:   func(string) string { return "" },
		Ingest:   ingestsvc.Options{Replay: true, ReplayPace: o.pace},
		Toolexec: toolexecsvc.Options{Replay: true, ReplayDelay: o.toolDelay},
		Turn:     o.turn,
	}
	if o.approve != "" {
		p := filepath.Join(t.TempDir(), "hooks.yaml")
		yaml := "hooks:\n  - name: approve-it\n    builtin:\n      type: require_approval\n      pattern: \"^" + o.approve + "$\"\n      reason: needs a person\n"
		if err := os.WriteFile(p, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg.Hookbridge = hookbridgesvc.Options{Config: p}
	}
	if o.script != nil || o.provider != nil || o.providers != nil {
		// The stack's ingest knows only the replay models: this test's
		// ingest serves both.
		cfg.Services = slices.DeleteFunc(cfg.Services, func(s string) bool { return s == cli.SvcIngest })
	}
	if o.noTurn {
		cfg.Services = slices.DeleteFunc(cfg.Services, func(s string) bool { return s == cli.SvcTurn })
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := cli.StartStack(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := st.Stop(ctx); err != nil {
			t.Error(err)
		}
	})
	if o.script != nil || o.provider != nil || o.providers != nil {
		startIngest(t, st, o)
	}
	if err := st.SyncHooks(ctx); err != nil {
		t.Fatal(err)
	}
	return st
}

// startTurns runs n turn services on st's NATS, each a stack of its own
// (instances r1, r2, …), as replicas of other processes.
func startTurns(t *testing.T, st *cli.Stack, n int, o turnsvc.Options) []*cli.Stack {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []*cli.Stack
	for i := range n {
		r, err := cli.StartStack(ctx, cli.StackConfig{
			NATSURL: st.URL, Services: []string{cli.SvcTurn}, Instance: fmt.Sprintf("r%d", i+1),
			Getenv: func(string) string { return "" }, Turn: o,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if err := r.Stop(ctx); err != nil {
				t.Error(err)
			}
		})
		if err := r.SyncHooks(ctx); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// startIngest runs ingest on st with the replay models and o.script.
func startIngest(t *testing.T, st *cli.Stack, o stackOpts) {
	t.Helper()
	rs, err := replay.NewServer(replay.Config{Pace: o.pace})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rs.Close() })
	providers := map[string]ingest.Factory{}
	for k, p := range o.providers {
		providers[k] = ingest.Static(p)
	}
	providers[replay.Prefix] = rs.Factory()
	providers["script"] = func(string) (llm.Provider, error) {
		if o.provider != nil {
			return o.provider, nil
		}
		return o.script, nil
	}
	ing, err := ingest.New(st.NC, ingest.Config{Prefix: st.Prefix, Logger: slog.New(slog.DiscardHandler), Providers: providers})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ing.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = ing.Stop(ctx)
	})
}

// startGateway serves a gateway of st on a random local port.
func startGateway(t *testing.T, st *cli.Stack, cfg gateway.Config) (*gateway.Gateway, *httptest.Server) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfg.Prefix = st.Prefix
	g, err := gateway.New(ctx, st.NC, cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(g)
	// As the gateway service's server: a request must arrive within
	// its read timeout, but a stream outlives it.
	srv.Config.ReadTimeout = time.Second
	srv.Config.ReadHeaderTimeout = time.Second
	srv.Start()
	t.Cleanup(func() {
		g.Close()
		srv.CloseClientConnections()
		srv.Close()
	})
	return g, srv
}

// part is one part of a stream: its type and its JSON.
type part struct {
	Type string
	Raw  json.RawMessage
}

func (p part) field(k string) string {
	var m map[string]any
	_ = json.Unmarshal(p.Raw, &m)
	switch v := m[k].(type) {
	case string:
		return v
	case nil:
		return ""
	default:
		b, _ := json.Marshal(v)
		return string(b)
	}
}

// readAll reads parts until [DONE] (done true) or until stop says so.
func readAll(t *testing.T, s *gateway.StreamReader, stop func([]part) bool) (parts []part, done bool) {
	t.Helper()
	for {
		typ, raw, err := s.Next()
		if errors.Is(err, gateway.ErrStreamEnded) {
			return parts, true
		}
		if err != nil {
			t.Fatalf("stream after %d parts: %v", len(parts), err)
		}
		if err := checkPart(raw); err != nil {
			t.Errorf("part %d %s breaks the protocol's schema: %v", len(parts), raw, err)
		}
		parts = append(parts, part{typ, raw})
		if stop != nil && stop(parts) {
			return parts, false
		}
	}
}

func types(ps []part) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Type
	}
	return out
}

// text joins the deltas of parts of type typ.
func text(ps []part, typ string) string {
	var b strings.Builder
	for _, p := range ps {
		if p.Type == typ {
			if typ == "tool-input-delta" {
				b.WriteString(p.field("inputTextDelta"))
			} else {
				b.WriteString(p.field("delta"))
			}
		}
	}
	return b.String()
}

func userMsg(text string) gateway.UIMessage {
	return gateway.UIMessage{ID: "u1", Role: "user", Parts: []gateway.UIPart{{Type: "text", Text: text}}}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// recorded is what one recorded Anthropic stream holds, read from the
// fixture bytes with plain encoding/json.
type recorded struct {
	blocks     []recBlock
	stopReason string
}

type recBlock struct {
	typ, id, name string
	text          string          // text, thinking or the tool input JSON
	startInput    json.RawMessage // content_block_start's input
}

func readRecorded(t *testing.T, name string) recorded {
	t.Helper()
	body, err := fixtures.SSE(name)
	if err != nil {
		t.Fatal(err)
	}
	var r recorded
	for _, line := range strings.Split(strings.ReplaceAll(string(body), "\r\n", "\n"), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Type         string `json:"type"`
			Index        int    `json:"index"`
			ContentBlock struct {
				Type  string          `json:"type"`
				ID    string          `json:"id"`
				Name  string          `json:"name"`
				Input json.RawMessage `json:"input"`
			} `json:"content_block"`
			Delta struct {
				Type        string `json:"type"`
				Text        string `json:"text"`
				Thinking    string `json:"thinking"`
				PartialJSON string `json:"partial_json"`
				StopReason  string `json:"stop_reason"`
			} `json:"delta"`
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		switch ev.Type {
		case "content_block_start":
			r.blocks = append(r.blocks, recBlock{typ: ev.ContentBlock.Type, id: ev.ContentBlock.ID, name: ev.ContentBlock.Name, startInput: ev.ContentBlock.Input})
		case "content_block_delta":
			b := &r.blocks[len(r.blocks)-1]
			b.text += ev.Delta.Text + ev.Delta.Thinking + ev.Delta.PartialJSON
		case "message_delta":
			r.stopReason = ev.Delta.StopReason
		}
	}
	return r
}

func readFixture(t *testing.T, name string) string {
	t.Helper()
	b, err := fixtures.SSE(name)
	if err != nil {
		t.Fatal(err)
	}
	return strings.ReplaceAll(string(b), "\r\n", "\n")
}
