package gemini_test

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"testing"
	"time"

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
		// A hang becomes a reported failure with the input.
		wd := time.AfterFunc(10*time.Second, func() {
			buf := make([]byte, 1<<20)
			n := runtime.Stack(buf, true)
			panic(fmt.Sprintf("hang on %q\n%s", body, buf[:n]))
		})
		defer wd.Stop()
		p, err := gemini.New(gemini.Config{APIKey: "k", BaseURL: "http://replay.invalid",
			HTTPClient: &http.Client{Transport: fixedTransport{body: body}}, MaxRetries: -1})
		if err != nil {
			t.Fatal(err)
		}
		s, err := p.Stream(context.Background(), simpleRequest())
		if err != nil {
			return // rejected before the stream: no stream to check
		}
		evs := collect(t, s)
		if err := wellFormed(evs); err != nil {
			t.Fatalf("not well-formed: %v\n%q", err, body)
		}
	})
}
