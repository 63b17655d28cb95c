package openairesponses_test

import (
	"context"
	"testing"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/llmworker/llmworker/pkg/llm"
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
	f.Fuzz(func(t *testing.T, body []byte) {
		srv.SetScript(providertest.SSE(body))
		s, err := p.Stream(context.Background(), simpleRequest())
		if err != nil {
			return
		}
		evs, _ := providertest.Collect(s)
		if err := llm.CheckWellFormed(evs); err != nil {
			t.Fatalf("not well-formed: %v", err)
		}
		if err := providertest.WellFormed(evs); err != nil {
			t.Fatalf("not well-formed (providertest): %v", err)
		}
	})
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
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				s := c.Responses.NewStreaming(context.Background(), responses.ResponseNewParams{Model: "o3-mini"})
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
					b.Fatal("no events")
				}
				s.Close()
			}
		})
	}
}
