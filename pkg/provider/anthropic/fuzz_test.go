package anthropic_test

import (
	"flag"
	"testing"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/provider/anthropic"
	"github.com/llmworker/llmworker/pkg/provider/providertest"
)

// fuzzing reports whether the test binary runs with -test.fuzz.
func fuzzing() bool {
	fl := flag.Lookup("test.fuzz")
	return fl != nil && fl.Value.String() != ""
}

// FuzzStream feeds mutated recorded streams through the SDK and the
// adapter: never a panic, always a well-formed stream.
func FuzzStream(f *testing.F) {
	for _, path := range providertest.Fixtures(f, "anthropic") {
		b, err := providertest.LoadFixture(path)
		if err != nil {
			f.Fatal(err)
		}
		if len(b) > 64<<10 && !testing.Short() && fuzzing() {
			// The fuzz engine mutates large inputs very slowly; the
			// 256 KB stream is kept as a regular seed only.
			continue
		}
		f.Add(b)
		if len(b) > 4096 {
			f.Add(b[:len(b)/2]) // cut mid-stream
		}
	}
	f.Add([]byte("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":3,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\"}}\n\n"))
	f.Add([]byte("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"\",\"name\":\"f\",\"input\":{}}}\n\nevent: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\"}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		p, err := anthropic.New(anthropic.Config{APIKey: "k", BaseURL: "http://replay.invalid",
			HTTPClient: providertest.FixedClient(body), MaxRetries: -1})
		if err != nil {
			t.Fatal(err)
		}
		providertest.CheckFuzzInput(t, p, simpleRequest(), body)
	})
}

// FuzzStructuredOutputStream feeds mutated streams of a forced output
// tool call (plain and wrapped answers) through the adapter with a
// request whose structured output rides on that tool: never a panic,
// always a well-formed stream, whatever the model sends.
func FuzzStructuredOutputStream(f *testing.F) {
	f.Add([]byte(forcedToolSSE("output", `{"name":"Paris"}`)))
	f.Add([]byte(forcedToolSSE("output", `{"value":["a","b"]}`)))
	f.Add([]byte(forcedToolSSE("get_weather", `{"city":"Paris"}`)))
	f.Add(providertest.MustLoadFixture(f, "anthropic/parallel-tool-use-after-text-empty-json_claude-3-5-haiku.sse"))
	f.Fuzz(func(t *testing.T, body []byte) {
		// The answer is wrapped for an odd-length body: both paths are
		// fuzzed from the same inputs.
		wrapped := len(body)%2 == 1
		p, err := anthropic.New(anthropic.Config{APIKey: "k", BaseURL: "http://replay.invalid",
			HTTPClient: providertest.FixedClient(body), MaxRetries: -1})
		if err != nil {
			t.Fatal(err)
		}
		schema := `{"type":"object"}`
		if wrapped {
			schema = `{"type":"array"}`
		}
		req := &llm.Request{Model: "anthropic:claude-3-5-haiku-latest", Messages: []events.Message{events.UserText("x")},
			Tools: []events.ToolDefinition{weatherTool()},
			ModelOptions: events.ModelOptions{ResponseFormat: &events.ResponseFormat{Type: events.FormatJSONSchema,
				Schema: []byte(schema)}}}
		providertest.CheckFuzzInput(t, p, req, body)
	})
}
