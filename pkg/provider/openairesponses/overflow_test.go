package openairesponses_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/provider/providertest"
)

// responsesOverflow is the Responses API's error object for an input
// above the window (as reported in dyad-sh/dyad#1672).
const responsesOverflow = `{"type":"invalid_request_error","code":"context_length_exceeded","message":"Your input exceeds the context window of this model. Please adjust your input and try again.","param":"input"}`

func TestContextOverflowAnswer(t *testing.T) {
	srv := providertest.NewServer(t, providertest.Status(http.StatusBadRequest, "", `{"error":`+responsesOverflow+`}`))
	_, err := newProvider(t, srv).Stream(context.Background(), simpleRequest())
	kind, status, retryable, ok := llm.ClassifyError(err)
	if !ok || kind != llm.KindContextOverflow || status != 400 || retryable {
		t.Fatalf("classified %s %d retryable=%v ok=%v (%v), want context_overflow 400", kind, status, retryable, ok, err)
	}
}

// A stream that fails with the overflow in its error event and
// response.failed (the shape of internal/leaf/fixtures' recorded
// response.failed stream) fails with context_overflow.
func TestMidStreamContextOverflow(t *testing.T) {
	const resp = `"id":"resp_1","object":"response","created_at":1763474589,"model":"gpt-5-2025-08-07","output":[]`
	chunks := `{"type":"response.created","sequence_number":0,"response":{` + resp + `,"status":"in_progress","error":null}}
{"type":"error","sequence_number":1,"error":` + responsesOverflow + `}
{"type":"response.failed","sequence_number":2,"response":{` + resp + `,"status":"failed","error":{"code":"context_length_exceeded","message":"Your input exceeds the context window of this model. Please adjust your input and try again."}}}
`
	body, err := providertest.ChunksToSSE(providertest.FormatOpenAIResponses, []byte(chunks))
	if err != nil {
		t.Fatal(err)
	}
	srv := providertest.NewServer(t, providertest.SSE(body))
	evs := providertest.MustRun(t, newProvider(t, srv), simpleRequest())
	var codes []string
	for _, ev := range evs {
		if e, ok := ev.(events.ErrorEvent); ok {
			codes = append(codes, e.Code)
		}
	}
	if len(codes) == 0 || codes[0] != "context_overflow" {
		t.Fatalf("error events %v, want context_overflow", codes)
	}
}
