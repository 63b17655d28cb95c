package llm_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
)

// A transcript with an Anthropic step (thinking, a Gemini-style signed
// text is not Anthropic's) and a step of another provider: what each
// provider is sent.
func TestForProvider(t *testing.T) {
	in := []events.Message{
		events.UserText("weather in Paris?"),
		{Role: events.RoleAssistant, Content: []events.Part{
			{Type: events.PartThinking, Thinking: "look it up", Signature: "EqQBCkYIBx", Origin: "anthropic"},
			{Type: events.PartThinking, Signature: "redacted_thinking:EmwKAhgB", Redacted: true, Origin: "anthropic"},
			{Type: events.PartToolUse, ID: "toolu_1", Name: "weather", Input: json.RawMessage(`{"city":"Paris"}`)},
		}},
		{Role: events.RoleTool, Content: []events.Part{events.ToolResultPart("toolu_1", "18°C", false)}},
		{Role: events.RoleAssistant, Content: []events.Part{
			{Type: events.PartText, Text: "It is 18°C.", Signature: "c2lnLWdlbWluaQ==", Origin: "gemini"},
			{Type: events.PartToolUse, ID: "srvtoolu_1", Name: "web_search", Input: json.RawMessage(`{}`), Origin: "anthropic"},
			{Type: events.PartToolResult, ToolUseID: "srvtoolu_1", Content: `{"type":"web_search_tool_result"}`, Origin: "anthropic"},
		}},
	}
	orig := mustJSON(t, in)

	toOpenAI := llm.ForProvider(in, "openai")
	want := []events.Message{
		in[0],
		{Role: events.RoleAssistant, Content: []events.Part{in[1].Content[2]}},
		in[2],
		{Role: events.RoleAssistant, Content: []events.Part{{Type: events.PartText, Text: "It is 18°C."}}},
	}
	if !reflect.DeepEqual(toOpenAI, want) {
		t.Fatalf("to openai:\n got %s\nwant %s", mustJSON(t, toOpenAI), mustJSON(t, want))
	}

	toAnthropic := llm.ForProvider(in, "anthropic")
	want = []events.Message{in[0], in[1], in[2],
		{Role: events.RoleAssistant, Content: []events.Part{{Type: events.PartText, Text: "It is 18°C."}, in[3].Content[1], in[3].Content[2]}}}
	if !reflect.DeepEqual(toAnthropic, want) {
		t.Fatalf("to anthropic:\n got %s\nwant %s", mustJSON(t, toAnthropic), mustJSON(t, want))
	}
	if mustJSON(t, in) != orig {
		t.Fatal("ForProvider modified its input")
	}

	// A message of thinking only is left out whole.
	only := []events.Message{events.UserText("hi"), {Role: events.RoleAssistant, Content: []events.Part{
		{Type: events.PartThinking, Thinking: "hm", Signature: "s", Origin: "anthropic"}}}, events.UserText("again")}
	if got := llm.ForProvider(only, "gemini"); len(got) != 2 || got[1].Text() != "again" {
		t.Fatalf("thinking-only message: %s", mustJSON(t, got))
	}

	// Nothing foreign: the same slice.
	plain := []events.Message{events.UserText("hi"), events.AssistantText("hello")}
	if got := llm.ForProvider(plain, "openai"); &got[0] != &plain[0] {
		t.Fatal("a transcript with nothing to leave out was copied")
	}
}

// Claude on the Claude API and on Vertex AI read each other's
// signatures: their parts share the origin "anthropic", and a part stored
// with the origin "vertex-anthropic" goes to both as well; other
// providers still get neither.
func TestForProviderSharedOrigin(t *testing.T) {
	if got := llm.Origin("vertex-anthropic"); got != "anthropic" {
		t.Fatalf("Origin(vertex-anthropic) = %q", got)
	}
	for _, p := range []string{"anthropic", "bedrock", "vertex", "gemini", "openai", "azure"} {
		if got := llm.Origin(p); got != p {
			t.Fatalf("Origin(%s) = %q", p, got)
		}
	}
	for _, origin := range []string{"anthropic", "vertex-anthropic"} {
		in := []events.Message{
			events.UserText("weather?"),
			{Role: events.RoleAssistant, Content: []events.Part{
				{Type: events.PartThinking, Thinking: "look it up", Signature: "EqQBCkYIBx", Origin: origin},
				{Type: events.PartToolUse, ID: "toolu_1", Name: "weather", Input: json.RawMessage(`{}`)},
			}},
		}
		for _, to := range []string{"anthropic", "vertex-anthropic"} {
			if got := llm.ForProvider(in, to); !reflect.DeepEqual(got, in) {
				t.Fatalf("origin %s to %s: %s", origin, to, mustJSON(t, got))
			}
		}
		for _, to := range []string{"bedrock", "vertex", "openai"} {
			got := llm.ForProvider(in, to)
			if len(got) != 2 || len(got[1].Content) != 1 || got[1].Content[0].Type != events.PartToolUse {
				t.Fatalf("origin %s to %s: %s", origin, to, mustJSON(t, got))
			}
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
