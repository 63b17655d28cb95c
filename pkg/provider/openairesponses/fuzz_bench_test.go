package openairesponses_test

import (
	"context"
	"testing"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/llmworker/llmworker/pkg/provider/openairesponses"
	"github.com/llmworker/llmworker/pkg/provider/providertest"
)

// FuzzResponsesStream serves mutated fixture streams through the real SDK:
// the adapter must never panic and always yield a well-formed stream.
func FuzzResponsesStream(f *testing.F) {
	for _, p := range providertest.Fixtures(f, "openai-responses") {
		f.Add(providertest.MustLoadFixture(f, p))
	}
	f.Add([]byte("event: x\ndata: {\"type\":\"response.function_call_arguments.delta\",\"output_index\":7,\"delta\":\"{\"}\n\n" +
		"event: x\ndata: {\"type\":\"response.output_item.done\",\"output_index\":7,\"item\":{\"type\":\"function_call\",\"arguments\":\"{}\"}}\n\n"))
	f.Add([]byte("event: x\ndata: {\"type\":\"response.reasoning_summary_text.delta\",\"output_index\":0,\"delta\":\"a\"}\n\n" +
		"event: x\ndata: {\"type\":\"response.output_text.delta\",\"output_index\":0,\"delta\":\"b\"}\n\n"))
	srv := providertest.NewServer(f)
	p, err := openairesponses.New(openairesponses.Config{APIKey: "k", BaseURL: srv.URL(), MaxRetries: -1})
	if err != nil {
		f.Fatal(err)
	}
	providertest.FuzzServer(f, srv, p, simpleRequest())
}

var benchFixtures = []string{"reasoning-summary-4-parts-then-text_o3-mini.sse", "function-call_gpt-4o.sse"}

// BenchmarkSDKReadOnly is the baseline: the SDK reading and decoding the
// recorded stream, nothing else.
func BenchmarkSDKReadOnly(b *testing.B) {
	for _, name := range benchFixtures {
		b.Run(name, func(b *testing.B) {
			body := providertest.MustLoadFixture(b, "openai-responses/"+name)
			srv := providertest.NewServer(b, providertest.SSE(body))
			c := sdk.NewClient(option.WithAPIKey("k"), option.WithBaseURL(srv.URL()), option.WithMaxRetries(0))
			providertest.BenchmarkSDK(b, body, func() (int, error) {
				return providertest.SDKCount(c.Responses.NewStreaming(context.Background(), responses.ResponseNewParams{Model: "o3-mini"}))
			})
		})
	}
}

// BenchmarkNormalize is the adapter on the same stream: SDK decoding plus
// mapping to §3 events plus llm.Normalize (with its idle-timeout reader).
func BenchmarkNormalize(b *testing.B) {
	for _, name := range benchFixtures {
		b.Run(name, func(b *testing.B) {
			body := providertest.MustLoadFixture(b, "openai-responses/"+name)
			srv := providertest.NewServer(b, providertest.SSE(body))
			p, err := openairesponses.New(openairesponses.Config{APIKey: "k", BaseURL: srv.URL(), MaxRetries: -1})
			if err != nil {
				b.Fatal(err)
			}
			providertest.BenchmarkStream(b, p, simpleRequest(), body)
		})
	}
}
