package replay_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/llmworker/llmworker/internal/fixtures"
	"github.com/llmworker/llmworker/internal/replay"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/ingest"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/tool"
)

// The genai SDK's dependencies start an opencensus worker in an init
// function; it is not ours and never ends.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"))
}

var plainDelta = regexp.MustCompile(`^[A-Za-z0-9 ,.]{4,}$`)

func collect(t *testing.T, p llm.Provider, msgs []events.Message) []events.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := p.Stream(ctx, &llm.Request{RequestID: "r1", Model: "replay:x", Messages: msgs})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	evs, err := llm.Collect(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := llm.CheckWellFormed(evs); err != nil {
		t.Fatal(err)
	}
	return evs
}

// TestScenarios plays both steps of every scenario through the real
// adapters and checks them against the recordings' bytes.
func TestScenarios(t *testing.T) {
	srv, err := replay.NewServer(replay.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	f := srv.Factory()
	for _, sc := range replay.Scenarios() {
		t.Run(sc.Name, func(t *testing.T) {
			p, err := f(sc.Name)
			if err != nil {
				t.Fatal(err)
			}
			first, _ := fixtures.SSE(sc.Steps[0])
			// Step 1: the recorded tool calls, with the recorded names.
			evs := collect(t, p, []events.Message{events.UserText("hi")})
			var names []string
			var calls []events.Part
			for _, ev := range evs {
				if bs, ok := ev.(events.BlockStart); ok && bs.BlockType == events.BlockToolUse {
					names = append(names, bs.Name)
					if !regexp.MustCompile(`"name":\s*"` + bs.Name + `"`).Match(first) {
						t.Errorf("tool %q is not in %s", bs.Name, sc.Steps[0])
					}
					calls = append(calls, events.ToolUsePart(bs.ID, bs.Name, json.RawMessage(`{}`)))
				}
			}
			if !slices.Equal(names, sc.Tools) {
				t.Fatalf("step 1 tool calls = %v, want %v", names, sc.Tools)
			}
			// Step 2 after the tool results: text, every delta taken from
			// the recording.
			msgs := []events.Message{events.UserText("hi"), {Role: events.RoleAssistant, Content: calls}}
			var results []events.Part
			for _, c := range calls {
				results = append(results, events.ToolResultPart(c.ID, "ok", false))
			}
			msgs = append(msgs, events.Message{Role: events.RoleTool, Content: results})
			second, _ := fixtures.SSE(sc.Steps[len(sc.Steps)-1])
			evs = collect(t, p, msgs)
			var text strings.Builder
			checked := 0
			for _, ev := range evs {
				d, ok := ev.(events.BlockDelta)
				if !ok || d.Kind != events.DeltaText {
					continue
				}
				text.WriteString(d.Content)
				if plainDelta.MatchString(d.Content) {
					checked++
					if !bytes.Contains(second, []byte(d.Content)) {
						t.Errorf("text delta %q is not in %s", d.Content, sc.Steps[1])
					}
				}
			}
			if text.Len() == 0 || checked == 0 {
				t.Fatalf("step 2 gave no checkable text (%d bytes)", text.Len())
			}
		})
	}
	if srv.Requests() != 2*len(replay.Scenarios()) {
		t.Errorf("server answered %d requests, want %d", srv.Requests(), 2*len(replay.Scenarios()))
	}
}

func TestThinkingInScenarios(t *testing.T) {
	srv, err := replay.NewServer(replay.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	for _, name := range []string{"anthropic", "openai-responses", "gemini"} {
		sc, _ := replay.Lookup(name)
		p, _ := srv.Provider(sc)
		msgs := []events.Message{events.UserText("q"), {Role: events.RoleAssistant, Content: []events.Part{events.ToolUsePart("c", sc.Tools[0], json.RawMessage(`{}`))}}, {Role: events.RoleTool, Content: []events.Part{events.ToolResultPart("c", "x", false)}}}
		thinking := 0
		for _, ev := range collect(t, p, msgs) {
			if d, ok := ev.(events.BlockDelta); ok && d.Kind == events.DeltaThinking {
				thinking++
			}
		}
		if thinking == 0 {
			t.Errorf("%s: no thinking in the text step", name)
		}
	}
}

func TestUnknownScenario(t *testing.T) {
	srv, err := replay.NewServer(replay.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	_, err = srv.Factory()("nope")
	if !errors.Is(err, ingest.ErrUnknownModel) || !errors.Is(err, replay.ErrUnknownScenario) {
		t.Fatalf("err = %v, want unknown model and unknown scenario", err)
	}
}

func TestStepOf(t *testing.T) {
	res := events.Message{Role: events.RoleTool, Content: []events.Part{events.ToolResultPart("c", "x", false)}}
	call := events.Message{Role: events.RoleAssistant, Content: []events.Part{events.ToolUsePart("c", "t", nil)}}
	cases := []struct {
		msgs []events.Message
		want int
	}{
		{nil, 0},
		{[]events.Message{events.UserText("a")}, 0},
		{[]events.Message{events.UserText("a"), call, res}, 1},
		{[]events.Message{events.UserText("a"), call, res, events.AssistantText("done"), events.UserText("again")}, 0},
		{[]events.Message{events.UserText("a"), call, res, call, res}, 2},
	}
	for i, c := range cases {
		if got := replay.StepOf(c.msgs); got != c.want {
			t.Errorf("case %d: StepOf = %d, want %d", i, got, c.want)
		}
	}
}

func TestDemoTools(t *testing.T) {
	byName := map[string]tool.Tool{}
	for _, tl := range replay.Tools() {
		byName[tl.Name()] = tl
		if !strings.HasPrefix(tl.Description(), "[demo]") {
			t.Errorf("%s: description %q does not say demo", tl.Name(), tl.Description())
		}
	}
	for _, sc := range replay.Scenarios() {
		for _, n := range sc.Tools {
			if byName[n] == nil {
				t.Errorf("scenario %s calls %s, which is not a demo tool", sc.Name, n)
			}
		}
	}
	out, err := byName["get_capital"].Execute(context.Background(), json.RawMessage(`{"country":"France"}`))
	if err != nil || !strings.Contains(out, "Paris") || !strings.Contains(out, replay.DemoNote) {
		t.Fatalf("get_capital = %q, %v", out, err)
	}
	out, err = byName["get_weather"].Execute(context.Background(), json.RawMessage(`{"city":"Mexico City"}`))
	if err != nil || !strings.Contains(out, "Mexico City") || !strings.Contains(out, replay.DemoNote) {
		t.Fatalf("get_weather = %q, %v", out, err)
	}
}

func TestServerUnknownFixture(t *testing.T) {
	srv, err := replay.NewServer(replay.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	resp, err := (&http.Client{}).Get(srv.URL() + "/v1/messages")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("status = %d, want 404", resp.StatusCode)
	}
}

func TestPace(t *testing.T) {
	srv, err := replay.NewServer(replay.Config{Pace: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	sc, _ := replay.Lookup("gemini")
	p, _ := srv.Provider(sc)
	evs := collect(t, p, []events.Message{events.UserText("q")})
	if len(evs) == 0 {
		t.Fatal("no events")
	}
}

// Every replay of a recording gets tool call ids of its own: call ids are
// de-duplication keys on the wire.
func TestUniqueCallIDs(t *testing.T) {
	srv, err := replay.NewServer(replay.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	sc, _ := replay.Lookup("anthropic")
	p, _ := srv.Provider(sc)
	ids := map[string]bool{}
	for range 2 {
		for _, ev := range collect(t, p, []events.Message{events.UserText("q")}) {
			if bs, ok := ev.(events.BlockStart); ok && bs.BlockType == events.BlockToolUse {
				if ids[bs.ID] || !strings.HasPrefix(bs.ID, "toolu_01825dXWLSoJwCst1qTsiWdb_") {
					t.Errorf("id %q reused or not derived from the recorded id", bs.ID)
				}
				ids[bs.ID] = true
			}
		}
	}
	if len(ids) != 2 {
		t.Fatalf("ids = %v", ids)
	}
}
