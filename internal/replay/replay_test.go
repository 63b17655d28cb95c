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
	"unicode/utf8"

	"go.uber.org/goleak"

	"github.com/llmworker/llmworker/internal/leaf/fixtures"
	"github.com/llmworker/llmworker/internal/replay"
	"github.com/llmworker/llmworker/internal/replay/demotools"
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

// call is one tool call a replayed step made, its input assembled from the
// streamed input_json deltas.
type call struct {
	id, name string
	input    strings.Builder
}

// playStep plays one step and returns its tool calls and text.
func playStep(t *testing.T, p llm.Provider, msgs []events.Message) (calls []*call, text []string, thinking int) {
	t.Helper()
	byIndex := map[int]*call{}
	for _, ev := range collect(t, p, msgs) {
		switch ev := ev.(type) {
		case events.BlockStart:
			if ev.BlockType == events.BlockToolUse {
				c := &call{id: ev.ID, name: ev.Name}
				byIndex[ev.Index] = c
				calls = append(calls, c)
			}
		case events.BlockDelta:
			switch ev.Kind {
			case events.DeltaText:
				text = append(text, ev.Content)
			case events.DeltaThinking:
				thinking++
			case events.DeltaInputJSON:
				if c := byIndex[ev.Index]; c != nil {
					c.input.WriteString(ev.Content)
				}
			}
		}
	}
	return calls, text, thinking
}

// TestScenarios plays every step of every scenario through the real
// adapters, running the demo tools on the recorded calls, and checks the
// steps against the recordings' bytes: the tool names of each tool step,
// the text of the last.
func TestScenarios(t *testing.T) {
	srv, err := replay.NewServer(replay.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	f := srv.Factory()
	tools := map[string]tool.Tool{}
	for _, tl := range demotools.Tools() {
		tools[tl.Name()] = tl
	}
	steps := 0
	for _, sc := range replay.Scenarios() {
		t.Run(sc.Name, func(t *testing.T) {
			p, err := f(sc.Name)
			if err != nil {
				t.Fatal(err)
			}
			msgs := []events.Message{events.UserText(sc.Prompt)}
			var names []string
			for i, fixture := range sc.Steps[:len(sc.Steps)-1] {
				raw, _ := fixtures.SSE(fixture)
				calls, _, _ := playStep(t, p, msgs)
				steps++
				if len(calls) == 0 {
					t.Fatalf("step %d (%s) made no tool call", i, fixture)
				}
				var uses, results []events.Part
				for _, c := range calls {
					if !regexp.MustCompile(`"name":\s*"` + c.name + `"`).Match(raw) {
						t.Errorf("tool %q is not in %s", c.name, fixture)
					}
					names = append(names, c.name)
					in := json.RawMessage(c.input.String())
					if len(in) == 0 {
						in = json.RawMessage(`{}`)
					}
					uses = append(uses, events.ToolUsePart(c.id, c.name, in))
					out, err := tools[c.name].Execute(context.Background(), in)
					if err != nil {
						t.Fatalf("demo %s(%s): %v", c.name, in, err)
					}
					results = append(results, events.ToolResultPart(c.id, out, false))
				}
				msgs = append(msgs, events.Message{Role: events.RoleAssistant, Content: uses}, events.Message{Role: events.RoleTool, Content: results})
			}
			if !slices.Equal(names, sc.Tools) {
				t.Fatalf("tool calls = %v, want %v", names, sc.Tools)
			}
			last := sc.Steps[len(sc.Steps)-1]
			raw, _ := fixtures.SSE(last)
			calls, text, _ := playStep(t, p, msgs)
			steps++
			if len(calls) != 0 || len(text) == 0 {
				t.Fatalf("last step: %d calls, text %q; want text only", len(calls), text)
			}
			// Each delta appears in the recording as a JSON string.
			for _, d := range text {
				var b bytes.Buffer
				enc := json.NewEncoder(&b)
				enc.SetEscapeHTML(false)
				_ = enc.Encode(d)
				quoted := bytes.TrimSuffix(b.Bytes(), []byte("\n"))
				if !bytes.Contains(raw, quoted) {
					t.Errorf("text delta %s is not in %s", quoted, last)
				}
			}
		})
	}
	if srv.Requests() != steps {
		t.Errorf("server answered %d requests, want %d", srv.Requests(), steps)
	}
}

// TestScenariosAreCoherent: each scenario is one recorded conversation, so
// what its demo tools answer for the recorded calls is what the recorded
// answer (or the next recorded call) uses. The values come from the
// recordings themselves: the arguments of each recorded call and the text
// of the recorded answer.
func TestScenariosAreCoherent(t *testing.T) {
	tools := map[string]tool.Tool{}
	for _, tl := range demotools.Tools() {
		tools[tl.Name()] = tl
	}
	srv, err := replay.NewServer(replay.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	for _, sc := range replay.Scenarios() {
		t.Run(sc.Name, func(t *testing.T) {
			p, _ := srv.Provider(sc)
			msgs := []events.Message{events.UserText(sc.Prompt)}
			var later []string // the recorded steps after each tool answered
			for i := range sc.Steps[:len(sc.Steps)-1] {
				calls, _, _ := playStep(t, p, msgs)
				rest := ""
				for _, f := range sc.Steps[i+1:] {
					b, _ := fixtures.SSE(f)
					rest += string(b)
				}
				var uses, results []events.Part
				for _, c := range calls {
					in := json.RawMessage(c.input.String())
					if len(in) == 0 {
						in = json.RawMessage(`{}`)
					}
					out, _ := tools[c.name].Execute(context.Background(), in)
					value := strings.TrimSuffix(out, " ("+demotools.DemoNote+")")
					if value == out || value == "" {
						t.Fatalf("%s(%s) = %q: not a marked demo value", c.name, in, out)
					}
					if !strings.Contains(rest, value) {
						t.Errorf("%s(%s) answers %q, which the recorded steps after it never use", c.name, in, value)
					}
					later = append(later, value)
					uses = append(uses, events.ToolUsePart(c.id, c.name, in))
					results = append(results, events.ToolResultPart(c.id, out, false))
				}
				msgs = append(msgs, events.Message{Role: events.RoleAssistant, Content: uses}, events.Message{Role: events.RoleTool, Content: results})
			}
			if len(later) != len(sc.Tools) {
				t.Fatalf("%d tool answers, want one per tool of %v", len(later), sc.Tools)
			}
		})
	}
}

// TestAnthropicScenarioThinks: the default replay scenario shows thinking
// before its tool call, as recorded.
func TestAnthropicScenarioThinks(t *testing.T) {
	srv, err := replay.NewServer(replay.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	sc, _ := replay.Lookup("anthropic")
	p, _ := srv.Provider(sc)
	if _, _, thinking := playStep(t, p, []events.Message{events.UserText(sc.Prompt)}); thinking == 0 {
		t.Error("anthropic: no thinking before the tool call")
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
	for _, tl := range demotools.Tools() {
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
	if err != nil || !strings.Contains(out, "Paris") || !strings.Contains(out, demotools.DemoNote) {
		t.Fatalf("get_capital = %q, %v", out, err)
	}
	out, err = byName["fixed_version"].Execute(context.Background(), json.RawMessage(`{}`))
	if err != nil || !strings.Contains(out, demotools.Version) || !strings.Contains(out, demotools.DemoNote) {
		t.Fatalf("fixed_version = %q, %v", out, err)
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

// A paced replay hands out each delta no sooner than a model writing
// Pace per token would have written it, whatever chunks the provider
// recorded.
func TestPace(t *testing.T) {
	const pace = 2 * time.Millisecond
	srv, err := replay.NewServer(replay.Config{Pace: pace})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	sc, _ := replay.Lookup("anthropic")
	p, _ := srv.Provider(sc)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := p.Stream(ctx, &llm.Request{RequestID: "r1", Model: "replay:x", Messages: []events.Message{events.UserText("q")}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	deltas, last := 0, time.Now()
	for s.Next() {
		now := time.Now()
		if d, ok := s.Current().(events.BlockDelta); ok {
			deltas++
			// About four characters a token, at least one per delta.
			tokens := max(1, (utf8.RuneCountInString(d.Content)+3)/4)
			if gap := now.Sub(last); gap < time.Duration(tokens)*pace {
				t.Errorf("delta %q (%d tokens) came %v after the event before it, want at least %v", d.Content, tokens, gap, time.Duration(tokens)*pace)
			}
		}
		last = now
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if deltas < 2 {
		t.Fatalf("%d deltas: the recording streams more", deltas)
	}
}

func TestTokens(t *testing.T) {
	for s, want := range map[string]int{"": 1, "Hi": 1, "abcd": 1, "abcde": 2, " London.": 2, "日本語の": 1, "日本語の首都": 2} {
		if got := replay.Tokens(s); got != want {
			t.Errorf("Tokens(%q) = %d, want %d", s, got, want)
		}
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
