package openairesponses_test

import (
	"context"
	"math/rand"
	"testing"

	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/provider/openairesponses"
	"github.com/llmworker/llmworker/pkg/provider/providertest"
)

// TestMutatedFixtures is a deterministic complement to the fuzz target:
// 300 randomly edited fixture streams (fixed seed), each of which must give
// a well-formed stream without a panic.
func TestMutatedFixtures(t *testing.T) {
	var seeds [][]byte
	for _, f := range providertest.Fixtures(t, "openai-responses") {
		seeds = append(seeds, providertest.MustLoadFixture(t, f))
	}
	srv := providertest.NewServer(t)
	p, err := openairesponses.New(openairesponses.Config{APIKey: "k", BaseURL: srv.URL(), MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewSource(1))
	for i := 0; i < 300; i++ {
		body := providertest.Mutate(r, seeds)
		srv.SetScript(providertest.SSE(body))
		s, err := p.Stream(context.Background(), simpleRequest())
		if err != nil {
			continue
		}
		evs, _ := providertest.Collect(s)
		if err := llm.CheckWellFormed(evs); err != nil {
			t.Fatalf("input %d: %v\n%q", i, err, body)
		}
	}
}
