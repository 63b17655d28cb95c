package turn_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/llmworker/llmworker/internal/leaf/fixtures"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/ingest"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/provider"
	"github.com/llmworker/llmworker/pkg/provider/anthropic"
	"github.com/llmworker/llmworker/pkg/provider/gemini"
	"github.com/llmworker/llmworker/pkg/provider/openai"
	"github.com/llmworker/llmworker/pkg/provider/providertest"
	"github.com/llmworker/llmworker/pkg/tool"
	"github.com/llmworker/llmworker/pkg/toolexec"
	"github.com/llmworker/llmworker/pkg/turn"
)

// providerCase is one provider format with a recorded tool-call stream and
// a recorded text stream.
type providerCase struct {
	prefix, model   string
	toolFix, textFx string
}

var providerCases = []providerCase{
	{"openai", "gpt-4o-mini", "openai-chat/single-tool-call-usage_gpt-4o-mini.sse", "openai-chat/text-include-usage_gpt-4.1-nano.chunks.jsonl"},
	{"openai-responses", "gpt-4o", "openai-responses/function-call_gpt-4o.sse", "openai-responses/text_gpt-4o.sse"},
	{"anthropic", "claude-haiku-4-5", "anthropic/thinking-then-tool-use_claude-haiku-4-5.sse", "anthropic/text-ping_claude-sonnet-4-5.sse"},
	{"gemini", "gemini-2.0-flash", "gemini/function-call_gemini-2.0-flash.sse", "gemini/text-usage_gemini-2.0-flash-exp.sse"},
}

// factories returns ingest's real adapters pointed at srv.
func factories(srv *providertest.Server) map[string]ingest.Factory {
	return provider.Builtin(provider.Config{
		OpenAI:    openai.Config{APIKey: "test-key", BaseURL: srv.URL(), MaxRetries: -1},
		Anthropic: anthropic.Config{APIKey: "test-key", BaseURL: srv.URL(), MaxRetries: -1},
		Gemini:    gemini.Config{APIKey: "test-key", BaseURL: srv.URL(), MaxRetries: -1},
	})
}

func sse(t testing.TB, path string) []byte {
	t.Helper()
	b, err := fixtures.SSE(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type directCall struct{ name, input string }

// direct plays a fixture through the provider's adapter alone (no NATS, no
// turn service): the independent expectation of what a turn makes of it.
func direct(t *testing.T, c providerCase, path string) (text string, calls []directCall) {
	t.Helper()
	srv := providertest.NewServer(t, providertest.SSE(sse(t, path)))
	p, err := factories(srv)[c.prefix](c.model)
	if err != nil {
		t.Fatal(err)
	}
	s, err := p.Stream(context.Background(), &llm.Request{RequestID: "direct", Model: c.prefix + ":" + c.model,
		Messages: []events.Message{events.UserText("hi")}})
	if err != nil {
		t.Fatal(err)
	}
	evs, err := llm.Collect(s)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	inputs := map[int]*strings.Builder{}
	names := map[int]string{}
	var order []int
	for _, ev := range evs {
		switch e := ev.(type) {
		case events.BlockStart:
			if e.BlockType == events.BlockToolUse && !e.Server {
				names[e.Index] = e.Name
				inputs[e.Index] = &strings.Builder{}
				order = append(order, e.Index)
			}
		case events.BlockDelta:
			switch {
			case e.Kind == events.DeltaText:
				b.WriteString(e.Content)
			case e.Kind == events.DeltaInputJSON && inputs[e.Index] != nil:
				inputs[e.Index].WriteString(e.Content)
			}
		}
	}
	for _, i := range order {
		calls = append(calls, directCall{names[i], inputs[i].String()})
	}
	return b.String(), calls
}

// recorder is a tool hosted on toolexec that records its inputs.
type recorder struct {
	mu     sync.Mutex
	inputs []json.RawMessage
}

func (r *recorder) tool(name string) tool.Tool {
	return tool.Must(name, "records its input", func(ctx context.Context, args map[string]any) (string, error) {
		b, _ := json.Marshal(args)
		r.mu.Lock()
		r.inputs = append(r.inputs, b)
		r.mu.Unlock()
		return "result of " + name, nil
	})
}

func (r *recorder) got() []json.RawMessage {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]json.RawMessage(nil), r.inputs...)
}

func sameJSON(a, b string) bool {
	if strings.TrimSpace(a) == "" {
		a = "{}"
	}
	if strings.TrimSpace(b) == "" {
		b = "{}"
	}
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return bytes.Equal(xb, yb)
}

// A multi-step tool turn on each provider format: the recorded tool-call
// stream, then the recorded text stream, through the real adapters in
// ingest, NATS, the turn service and a toolexec replica.
func TestToolTurnPerProvider(t *testing.T) {
	for _, c := range providerCases {
		t.Run(c.prefix, func(t *testing.T) {
			wantText, _ := direct(t, c, c.textFx)
			_, calls := direct(t, c, c.toolFix)
			if len(calls) != 1 || wantText == "" {
				t.Fatalf("fixture expectations: text %q, calls %+v", wantText, calls)
			}
			call := calls[0]

			e := newEnv(t)
			srv := providertest.NewServer(t, providertest.SSE(sse(t, c.toolFix)), providertest.SSE(sse(t, c.textFx)))
			e.startIngest(factories(srv))
			rec := &recorder{}
			e.startToolexec(toolexec.Config{}, rec.tool(call.name))
			e.startTurn(turn.Config{})

			id := newID("prov-" + c.prefix)
			w := e.watch(id)
			e.submit(events.TurnRequest{TurnID: id, Model: c.prefix + ":" + c.model,
				Messages: []events.Message{events.UserText("go")}, Tools: []string{call.name}})
			done := w.completed()

			uses, results := toolUses(done.Messages)
			if len(uses) != 1 || uses[0].Name != call.name || !sameJSON(string(uses[0].Input), call.input) {
				t.Fatalf("tool_use parts %+v, want %s %s", uses, call.name, call.input)
			}
			if r, ok := results[uses[0].ID]; !ok || r.Content != "result of "+call.name || r.IsError {
				t.Fatalf("tool_result of %s: %+v (transcript %s)", uses[0].ID, r, mustJSON(t, done.Messages))
			}
			if got := rec.got(); len(got) != 1 || !sameJSON(string(got[0]), call.input) {
				t.Fatalf("the tool ran with %s, want once with %s", got, call.input)
			}
			last := done.Messages[len(done.Messages)-1]
			if last.Role != events.RoleAssistant || last.Text() != wantText {
				t.Fatalf("final message %+v, want text %q", last, wantText)
			}
			evs := w.events()
			checkSeq(t, evs)
			if n := count(evs, events.TypeTurnStep); n != 2 {
				t.Fatalf("%d steps, want 2", n)
			}
			// The second request carried the tool result to the provider.
			reqs := srv.Requests()
			if len(reqs) != 2 || !bytes.Contains(reqs[1].Body, []byte("result of "+call.name)) {
				t.Fatalf("provider requests: %d; second body lacks the tool result", len(reqs))
			}
		})
	}
}
