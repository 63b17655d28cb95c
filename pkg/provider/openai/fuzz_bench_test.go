package openai_test

import (
	"context"
	"testing"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/llmworker/llmworker/pkg/provider/openai"
	"github.com/llmworker/llmworker/pkg/provider/providertest"
)

// FuzzChatStream serves mutated fixture streams through the real SDK: the
// adapter must never panic and always yield a well-formed stream.
func FuzzChatStream(f *testing.F) {
	for _, p := range providertest.Fixtures(f, "openai-chat") {
		f.Add(providertest.MustLoadFixture(f, p))
	}
	f.Add([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":3,\"function\":{\"arguments\":\"{\"}}]}}]}\n\ndata: [DONE]\n\n"))
	f.Add([]byte("event: error\ndata: {\"error\":\"plain\"}\n\n"))
	srv := providertest.NewServer(f)
	p, err := openai.New(openai.Config{APIKey: "k", BaseURL: srv.URL(), MaxRetries: -1})
	if err != nil {
		f.Fatal(err)
	}
	providertest.FuzzServer(f, srv, p, simpleRequest())
}

func benchFixture(b *testing.B, name string) (*providertest.Server, []byte) {
	body := providertest.MustLoadFixture(b, "openai-chat/"+name)
	return providertest.NewServer(b, providertest.SSE(body)), body
}

var benchFixtures = []string{"text-include-usage_gpt-4.1-nano.chunks.jsonl", "parallel-tool-calls-streamed-args_gpt-4o.sse"}

// BenchmarkSDKReadOnly is the baseline: the SDK reading and decoding the
// recorded stream, nothing else.
func BenchmarkSDKReadOnly(b *testing.B) {
	for _, name := range benchFixtures {
		b.Run(name, func(b *testing.B) {
			srv, body := benchFixture(b, name)
			c := sdk.NewClient(option.WithAPIKey("k"), option.WithBaseURL(srv.URL()), option.WithMaxRetries(0))
			providertest.BenchmarkSDK(b, body, func() (int, error) {
				return providertest.SDKCount(c.Chat.Completions.NewStreaming(context.Background(), sdk.ChatCompletionNewParams{Model: "gpt-4o"}))
			})
		})
	}
}

// BenchmarkNormalize is the adapter on the same stream: SDK decoding plus
// mapping to §3 events plus llm.Normalize (with its idle-timeout reader).
func BenchmarkNormalize(b *testing.B) {
	for _, name := range benchFixtures {
		b.Run(name, func(b *testing.B) {
			srv, body := benchFixture(b, name)
			p, err := openai.New(openai.Config{APIKey: "k", BaseURL: srv.URL(), MaxRetries: -1})
			if err != nil {
				b.Fatal(err)
			}
			providertest.BenchmarkStream(b, p, simpleRequest(), body)
		})
	}
}
