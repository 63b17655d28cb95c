package llm_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
)

// The expected counts follow the rules documented on EstimateTokens, by
// hand.
func TestEstimateTokens(t *testing.T) {
	req := &llm.Request{
		Model:  "anthropic:claude-sonnet-4-5",
		System: strings.Repeat("s", 40),                                                                                          // 10
		Tools:  []events.ToolDefinition{{Name: "read", Description: "reads", InputSchema: json.RawMessage(`{"type":"object"}`)}}, // 8 + ceil(26/4)=7 → 15
		Messages: []events.Message{
			events.UserText(strings.Repeat("a", 401)), // 4 + 101 = 105
			{Role: events.RoleAssistant, Content: []events.Part{
				events.TextPart("ok"), // 1
				events.ToolUsePart("c1", "read", json.RawMessage(`{"path":"x"}`)), // 8 + ceil(16/4)=4 → 12
			}}, // 4 + 13 = 17
			{Role: events.RoleUser, Content: []events.Part{
				events.ToolResultPart("c1", strings.Repeat("r", 20000), false),                       // 8 + 5000
				{Type: events.PartImage, MediaType: "image/png", Ref: "sha256:00", Size: 1 << 20},    // 1600
				{Type: events.PartFile, MediaType: "application/pdf", Ref: "sha256:01", Size: 64000}, // max(4000, 1600) = 4000
				{Type: events.PartFile, MediaType: "text/csv", Ref: "sha256:02", Size: 4000},         // 1000
				{Type: events.PartFile, MediaType: "application/pdf", Ref: "sha256:03", Size: 100},   // 1600
			}}, // 4 + 5008 + 1600 + 4000 + 1000 + 1600 = 13212
		},
	}
	const whole = 10 + 15 + 105 + 17 + 13212
	if got := llm.EstimateTokens(req, 0, 0); got != whole {
		t.Errorf("whole request: %d, want %d", got, whole)
	}
	// The provider counted 150 for the first message (with the system
	// prompt and the tools): the rest is estimated.
	if got := llm.EstimateTokens(req, 150, 1); got != 150+17+13212 {
		t.Errorf("after one message: %d, want %d", got, 150+17+13212)
	}
	if got := llm.EstimateTokens(req, 900, 3); got != 900 {
		t.Errorf("nothing added: %d, want 900", got)
	}
	// A count of a transcript longer than this one says nothing of it.
	if got := llm.EstimateTokens(req, 900, 4); got != whole {
		t.Errorf("last count of a longer transcript: %d, want the whole estimate %d", got, whole)
	}
	// Inline data: a base64 text file of 4000 bytes is 5336 characters.
	data := strings.Repeat("QUJD", 1334) // 5336 chars → 4002 bytes → 1001
	file := &llm.Request{Messages: []events.Message{{Role: events.RoleUser, Content: []events.Part{{Type: events.PartFile, MediaType: "application/json", Data: data}}}}}
	if got := llm.EstimateTokens(file, 0, 0); got != 4+1001 {
		t.Errorf("inline file: %d, want %d", got, 4+1001)
	}
}

func TestCheckContext(t *testing.T) {
	limits := llm.LimitsFunc(func(m string) (llm.ModelLimits, bool) {
		if m == "replay:small" {
			return llm.ModelLimits{ContextWindow: 32768, MaxOutputTokens: 4096}, true
		}
		return llm.ModelLimits{}, false
	})
	// 40 KB of text: 10,000 tokens + 4 per message.
	msg := events.UserText(strings.Repeat("x", 40000))
	req := &llm.Request{Model: "replay:small", Messages: []events.Message{msg, msg}}
	// Budget: 32768 − 4096 − 1024 (2% of the window is 655, the floor is 1024) = 27648.
	c := llm.CheckContext(req, limits, 0, 0, -1)
	if !c.Known || c.Budget != 27648 || c.Estimate != 20008 || c.Over() {
		t.Fatalf("two messages: %+v", c)
	}
	req.Messages = append(req.Messages, msg)
	if c := llm.CheckContext(req, limits, 0, 0, -1); c.Estimate != 30012 || !c.Over() {
		t.Fatalf("three messages: %+v, want over", c)
	}
	// max_tokens replaces the model's max output in the room kept; an
	// explicit reserve replaces the default.
	req.MaxTokens = 1000
	if c := llm.CheckContext(req, limits, 0, 0, 0); c.Budget != 31768 || c.Over() {
		t.Fatalf("max_tokens 1000, no reserve: %+v", c)
	}
	// Unknown model, or no table: not Known, never Over.
	req.Model = "azure:x"
	if c := llm.CheckContext(req, limits, 0, 0, -1); c.Known || c.Over() {
		t.Fatalf("unknown model: %+v", c)
	}
	if c := llm.CheckContext(req, nil, 0, 0, -1); c.Known || c.Over() || c.Estimate != 30012 {
		t.Fatalf("no limits: %+v", c)
	}
}

// transcript is a coding-style session of n messages: user questions,
// assistant text with a tool call, 20 KB tool results.
func transcript(n int) []events.Message {
	out := make([]events.Message, 0, n)
	result := strings.Repeat("line of a file\n", 1400)
	for i := 0; len(out) < n; i++ {
		out = append(out, events.UserText("please look at the file and tell me what it does"))
		out = append(out, events.Message{Role: events.RoleAssistant, Content: []events.Part{
			events.TextPart("I will read it."),
			events.ToolUsePart("c", "read_file", json.RawMessage(`{"path":"src/main.go"}`)),
		}})
		out = append(out, events.Message{Role: events.RoleUser, Content: []events.Part{events.ToolResultPart("c", result, false)}})
	}
	return out[:n]
}

// BenchmarkEstimateTokens: a 200-message transcript, estimated whole
// (the first call of a run) and after one added message (every later
// call).
func BenchmarkEstimateTokens(b *testing.B) {
	req := &llm.Request{Model: "anthropic:claude-sonnet-4-5", System: strings.Repeat("s", 4000), Messages: transcript(200)}
	b.Run("whole", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = llm.EstimateTokens(req, 0, 0)
		}
	})
	b.Run("incremental", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = llm.EstimateTokens(req, 180000, 199)
		}
	})
}
