package anthropic_test

import (
	"context"
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
				option.WithBaseURL("http://replay.invalid"), option.WithHTTPClient(providertest.FixedClient(body)))
			params := sdk.MessageNewParams{Model: "claude-test", MaxTokens: 1024,
				Messages: []sdk.MessageParam{sdk.NewUserMessage(sdk.NewTextBlock("hi"))}}
			providertest.BenchmarkSDK(b, body, func() (int, error) {
				return providertest.SDKCount(client.Messages.NewStreaming(context.Background(), params))
			})
		})
	}
}

func BenchmarkAdapter(b *testing.B) {
	for _, name := range benchFixtures {
		body := providertest.MustLoadFixture(b, name)
		b.Run(name[len("anthropic/"):], func(b *testing.B) {
			p, err := anthropic.New(anthropic.Config{APIKey: "k", BaseURL: "http://replay.invalid",
				HTTPClient: providertest.FixedClient(body)})
			if err != nil {
				b.Fatal(err)
			}
			providertest.BenchmarkStream(b, p, simpleRequest(), body)
		})
	}
}
