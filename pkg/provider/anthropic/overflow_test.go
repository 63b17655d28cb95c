package anthropic_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/provider/anthropic"
	"github.com/llmworker/llmworker/pkg/provider/providertest"
)

// promptTooLong is the Messages API's answer to a prompt above the
// window, as recorded in anthropics/claude-code#12186.
const promptTooLong = `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208310 tokens > 200000 maximum"},"request_id":"req_011CVQe1dLrGNMJyE1ghG1av"}`

func TestPromptTooLongIsContextOverflow(t *testing.T) {
	srv := providertest.NewServer(t, providertest.Status(http.StatusBadRequest, "", promptTooLong))
	p := newProvider(t, anthropic.Config{BaseURL: srv.URL()})
	_, err := p.Stream(context.Background(), simpleRequest())
	kind, status, retryable, ok := llm.ClassifyError(err)
	if !ok || kind != llm.KindContextOverflow || status != http.StatusBadRequest || retryable {
		t.Fatalf("classified %s %d retryable=%v ok=%v (%v), want context_overflow 400 not retryable", kind, status, retryable, ok, err)
	}
	// Another invalid request stays one.
	srv.SetScript(providertest.Status(http.StatusBadRequest, "", `{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: Field required"}}`))
	_, err = p.Stream(context.Background(), simpleRequest())
	if kind, _, _, _ := llm.ClassifyError(err); kind != llm.KindInvalidRequest {
		t.Fatalf("a plain invalid request classified %s", kind)
	}
}

func TestMidStreamPromptTooLong(t *testing.T) {
	body := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"x\",\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n" +
		"event: error\ndata: " + promptTooLong + "\n\n"
	srv := providertest.NewServer(t, providertest.SSE([]byte(body)))
	p := newProvider(t, anthropic.Config{BaseURL: srv.URL()})
	s, err := p.Stream(context.Background(), simpleRequest())
	if err != nil {
		t.Fatal(err)
	}
	evs := providertest.MustCollect(t, s)
	if e, ok := evs[len(evs)-2].(events.ErrorEvent); !ok || e.Code != "context_overflow" || e.Message != "prompt is too long: 208310 tokens > 200000 maximum" {
		t.Fatalf("error event %#v, want context_overflow", evs[len(evs)-2])
	}
}
