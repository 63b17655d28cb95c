package gemini_test

import (
	"context"
	"testing"

	"google.golang.org/genai"

	"github.com/llmworker/llmworker/pkg/provider/gemini"
	"github.com/llmworker/llmworker/pkg/provider/providertest"
)

// The benchmarks replay a recorded stream from memory. BenchmarkSDKRead is
// the baseline: the SDK merely reading the stream (decoding every chunk);
// BenchmarkAdapter adds the mapping to §3 events and llm.Normalize.
var benchFixtures = []string{
	"gemini/thought-parts-signature_gemini-2.5-pro.sse",
	"gemini/vertex-parallel-function-calls-streamed-args_gemini-3.1-pro-preview.chunks.jsonl",
}

func BenchmarkSDKRead(b *testing.B) {
	for _, name := range benchFixtures {
		body := providertest.MustLoadFixture(b, name)
		b.Run(name[len("gemini/"):], func(b *testing.B) {
			client, err := genai.NewClient(context.Background(), &genai.ClientConfig{APIKey: "k", Backend: genai.BackendGeminiAPI,
				HTTPClient: providertest.FixedClient(body), HTTPOptions: genai.HTTPOptions{BaseURL: "http://replay.invalid"}})
			if err != nil {
				b.Fatal(err)
			}
			contents := []*genai.Content{genai.NewContentFromText("hi", genai.RoleUser)}
			cfg := &genai.GenerateContentConfig{AutomaticContinuation: genai.Ptr(false)}
			providertest.BenchmarkSDK(b, body, func() (int, error) {
				n := 0
				for r, err := range client.Models.GenerateContentStream(context.Background(), "gemini-test", contents, cfg) {
					if err != nil {
						return n, err
					}
					_ = r
					n++
				}
				return n, nil
			})
		})
	}
}

func BenchmarkAdapter(b *testing.B) {
	for _, name := range benchFixtures {
		body := providertest.MustLoadFixture(b, name)
		b.Run(name[len("gemini/"):], func(b *testing.B) {
			p, err := gemini.New(gemini.Config{APIKey: "k", BaseURL: "http://replay.invalid",
				HTTPClient: providertest.FixedClient(body)})
			if err != nil {
				b.Fatal(err)
			}
			providertest.BenchmarkStream(b, p, simpleRequest(), body)
		})
	}
}
