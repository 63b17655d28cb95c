package anthropic_test

import (
	"context"
	"net/http"
	"testing"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

	"github.com/llmworker/llmworker/pkg/provider/anthropic"
	"github.com/llmworker/llmworker/pkg/provider/providertest"
)

// The benchmarks replay a recorded stream from memory. BenchmarkSDKRead is
// the baseline: the SDK merely reading the stream (decoding every event);
// BenchmarkAdapter adds the mapping to §3 events and llm.Normalize.
var benchFixtures = []string{
	"anthropic/server-web-search-pause-turn_claude-sonnet-4-5.sse",
	"anthropic/thinking-signature-text_claude-sonnet-4.sse",
}

func BenchmarkSDKRead(b *testing.B) {
	for _, name := range benchFixtures {
		body := providertest.MustLoadFixture(b, name)
		b.Run(name[len("anthropic/"):], func(b *testing.B) {
			client := sdk.NewClient(option.WithoutEnvironmentDefaults(), option.WithAPIKey("k"),
				option.WithBaseURL("http://replay.invalid"), option.WithHTTPClient(&http.Client{Transport: fixedTransport{body: body}}))
			params := sdk.MessageNewParams{Model: "claude-test", MaxTokens: 1024,
				Messages: []sdk.MessageParam{sdk.NewUserMessage(sdk.NewTextBlock("hi"))}}
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				s := client.Messages.NewStreaming(context.Background(), params)
				n := 0
				for s.Next() {
					_ = s.Current()
					n++
				}
				if s.Err() != nil || n == 0 {
					b.Fatal(s.Err())
				}
				s.Close()
			}
		})
	}
}

func BenchmarkAdapter(b *testing.B) {
	for _, name := range benchFixtures {
		body := providertest.MustLoadFixture(b, name)
		b.Run(name[len("anthropic/"):], func(b *testing.B) {
			p, err := anthropic.New(anthropic.Config{APIKey: "k", BaseURL: "http://replay.invalid",
				HTTPClient: &http.Client{Transport: fixedTransport{body: body}}})
			if err != nil {
				b.Fatal(err)
			}
			req := simpleRequest()
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				s, err := p.Stream(context.Background(), req)
				if err != nil {
					b.Fatal(err)
				}
				n := 0
				for s.Next() {
					_ = s.Current()
					n++
				}
				if n < 3 {
					b.Fatal("short stream")
				}
				s.Close()
			}
		})
	}
}
