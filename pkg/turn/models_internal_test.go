package turn

import (
	"testing"

	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/models"
)

// The workers get the shipped table without Config.Models, and the
// operator's table over it with one.
func TestModelTableInForce(t *testing.T) {
	s := &Service{}
	if l, ok := s.models().Lookup("openai:gpt-4o"); !ok || l != (llm.ModelLimits{ContextWindow: 128_000, MaxOutputTokens: 16_384}) {
		t.Fatalf("shipped: %+v %v", l, ok)
	}
	tb, err := models.Parse([]byte(`{"models":{"azure:my-4o":{"context_window":128000,"max_output_tokens":16384}}}`), false)
	if err != nil {
		t.Fatal(err)
	}
	s.cfg.Models = tb
	if l, ok := s.models().Lookup("azure:my-4o"); !ok || l.ContextWindow != 128_000 {
		t.Fatalf("file entry: %+v %v", l, ok)
	}
	if _, ok := s.models().Lookup("openai:gpt-4o"); !ok {
		t.Fatal("the shipped table is gone under a file")
	}
}
