package bedrock_test

import (
	"testing"

	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/provider/bedrock"
	"github.com/llmworker/llmworker/pkg/provider/providertest"
)

// FuzzStream serves arbitrary bytes as the event stream: Stream may refuse
// them, but a stream it returns is well-formed.
func FuzzStream(f *testing.F) {
	for _, path := range providertest.Fixtures(f, "bedrock") {
		f.Add(providertest.MustLoadFixture(f, path))
	}
	awsEnv(f, "http://bedrock.test")
	f.Fuzz(func(t *testing.T, body []byte) {
		p := providertest.MustNew(t, bedrock.New, bedrock.Config{MaxRetries: -1, HTTPClient: providertest.FixedClient(body)})
		providertest.CheckFuzzInput(t, p, providertest.SimpleRequest("bedrock:"+testModel), body)
	})
}

// TestMutatedRecordings: random edits of the framed recordings (broken
// CRCs, lengths, payloads) end every stream well-formed, without a panic.
func TestMutatedRecordings(t *testing.T) {
	awsEnv(t, "")
	providertest.CheckMutatedFixtures(t, "bedrock", 300, providertest.SimpleRequest("bedrock:"+testModel), func(baseURL string) (llm.Provider, error) {
		return bedrock.New(bedrock.Config{MaxRetries: -1, BaseURL: baseURL})
	})
}
