package openai_test

import (
	"testing"

	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/provider/openai"
	"github.com/llmworker/llmworker/pkg/provider/providertest"
)

// TestMutatedFixtures is a deterministic complement to the fuzz target:
// 300 randomly edited fixture streams (fixed seed), each of which must give
// a well-formed stream without a panic.
func TestMutatedFixtures(t *testing.T) {
	providertest.CheckMutatedFixtures(t, "openai-chat", 300, simpleRequest(), func(baseURL string) (llm.Provider, error) {
		return openai.New(openai.Config{APIKey: "k", BaseURL: baseURL, MaxRetries: -1})
	})
}
