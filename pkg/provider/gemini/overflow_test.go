package gemini_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/provider/gemini"
	"github.com/llmworker/llmworker/pkg/provider/providertest"
)

// geminiOverflow is the Gemini API's answer to an input above the
// window, as recorded in google-gemini/gemini-cli#6678.
const geminiOverflow = `{"error":{"code":400,"message":"The input token count (1200293) exceeds the maximum number of tokens allowed (1048576).","errors":[{"message":"The input token count (1200293) exceeds the maximum number of tokens allowed (1048576).","domain":"global","reason":"badRequest"}],"status":"INVALID_ARGUMENT"}}`

func TestContextOverflowAnswer(t *testing.T) {
	srv := providertest.NewServer(t, providertest.Status(http.StatusBadRequest, "", geminiOverflow))
	p := newProvider(t, gemini.Config{BaseURL: srv.URL()})
	_, err := p.Stream(context.Background(), simpleRequest())
	kind, status, retryable, ok := llm.ClassifyError(err)
	if !ok || kind != llm.KindContextOverflow || status != 400 || retryable {
		t.Fatalf("classified %s %d retryable=%v ok=%v (%v), want context_overflow 400", kind, status, retryable, ok, err)
	}
	// Another INVALID_ARGUMENT stays an invalid request.
	srv.SetScript(providertest.Status(http.StatusBadRequest, "", `{"error":{"code":400,"message":"bad","status":"INVALID_ARGUMENT"}}`))
	_, err = p.Stream(context.Background(), simpleRequest())
	if kind, _, _, _ := llm.ClassifyError(err); kind != llm.KindInvalidRequest {
		t.Fatalf("a plain invalid request classified %s", kind)
	}
}
