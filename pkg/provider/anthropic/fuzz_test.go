package anthropic_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"net/http"
	"reflect"
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

// captureTransport answers every request with a recorded stream and keeps
// the last request body.
type captureTransport struct {
	providertest.FixedTransport
	body []byte
}

func (c *captureTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.body, _ = io.ReadAll(r.Body)
	_ = r.Body.Close()
	r.Body = io.NopCloser(bytes.NewReader(nil))
	return c.FixedTransport.RoundTrip(r)
}

// FuzzProviderOptions applies arbitrary provider_options objects: the
// request is refused or its body is JSON whose top-level scalar options
// are the ones given.
func FuzzProviderOptions(f *testing.F) {
	f.Add([]byte(`{"metadata":{"user_id":"u"},"temperature":null,"thinking":{"display":"omitted"}}`))
	f.Add([]byte(`{"a.b":1,"*":{"?":[1]},"\\":"x","#":true}`))
	f.Add([]byte(`{"messages":null,"model":"m","max_tokens":{"x":1}}`))
	body := providertest.MustLoadFixture(f, textFixture)
	f.Fuzz(func(t *testing.T, opts []byte) {
		var m map[string]json.RawMessage
		if json.Unmarshal(opts, &m) != nil || m == nil {
			return
		}
		ct := &captureTransport{FixedTransport: providertest.FixedTransport{Body: body}}
		p, err := anthropic.New(anthropic.Config{APIKey: "k", BaseURL: "http://replay.invalid",
			HTTPClient: &http.Client{Transport: ct}, MaxRetries: -1})
		if err != nil {
			t.Fatal(err)
		}
		req := simpleRequest()
		req.ProviderOptions = map[string]json.RawMessage{"anthropic": opts}
		s, err := p.Stream(context.Background(), req)
		if err != nil {
			return
		}
		_ = s.Close()
		var sent map[string]json.RawMessage
		if err := json.Unmarshal(ct.body, &sent); err != nil {
			t.Fatalf("body is not a JSON object: %v\n%s", err, ct.body)
		}
		for k, v := range m {
			v = bytes.TrimSpace(v)
			if len(v) == 0 || v[0] == '{' || string(v) == "null" {
				continue
			}
			var want, got any
			_ = json.Unmarshal(v, &want)
			_ = json.Unmarshal(sent[k], &got)
			if !reflect.DeepEqual(want, got) {
				t.Fatalf("option %q = %s, body has %s", k, v, sent[k])
			}
		}
	})
}
