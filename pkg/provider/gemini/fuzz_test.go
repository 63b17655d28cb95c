package gemini_test

import (
	"testing"

	"github.com/llmworker/llmworker/pkg/provider/gemini"
	"github.com/llmworker/llmworker/pkg/provider/providertest"
)

// FuzzStream feeds mutated recorded streams through the SDK and the
// adapter: never a panic, always a well-formed stream.
func FuzzStream(f *testing.F) {
	for _, path := range providertest.Fixtures(f, "gemini") {
		b, err := providertest.LoadFixture(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(b[:len(b)/2]) // cut mid-stream
	}
	f.Add([]byte("data: {\"candidates\":[{\"content\":{\"parts\":[{\"functionCall\":{\"partialArgs\":[{\"jsonPath\":\"$.a[2].b\",\"stringValue\":\"x\",\"willContinue\":true}],\"willContinue\":true}}]}}]}\r\n\r\n"))
	f.Add([]byte("data: {\"candidates\":[{\"content\":{\"parts\":[{\"functionCall\":{\"name\":\"f\",\"willContinue\":true}},{\"functionCall\":{\"partialArgs\":[{\"jsonPath\":\"$['k']\",\"numberValue\":1}]}}]},\"finishReason\":\"STOP\"}]}\r\n\r\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		p, err := gemini.New(gemini.Config{APIKey: "k", BaseURL: "http://replay.invalid",
			HTTPClient: providertest.FixedClient(body), MaxRetries: -1})
		if err != nil {
			t.Fatal(err)
		}
		providertest.CheckFuzzInput(t, p, simpleRequest(), body)
	})
}
