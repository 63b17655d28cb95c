package bedrock_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/provider/providertest"
)

// Bedrock's answers to an input above the window: its own
// ValidationException message (aws-samples/assessment-generator#2), and
// the Claude model's, passed through (daisuke-awaji/moca#254).
func TestContextOverflowAnswers(t *testing.T) {
	for _, msg := range []string{
		"Input is too long for requested model.",
		"The model returned the following errors: prompt is too long: 200049 tokens > 200000 maximum",
	} {
		resp := providertest.Status(http.StatusBadRequest, "", `{"message":"`+msg+`"}`)
		resp.Header.Set("X-Amzn-ErrorType", "ValidationException:http://internal.amazon.com/coral/com.amazon.bedrock/")
		srv := providertest.NewServer(t, resp)
		_, err := newProvider(t, srv).Stream(context.Background(), providertest.SimpleRequest("bedrock:"+testModel))
		kind, status, retryable, _ := llm.ClassifyError(err)
		if kind != llm.KindContextOverflow || status != 400 || retryable {
			t.Errorf("%q: kind %s status %d retryable=%v (%v), want context_overflow 400", msg, kind, status, retryable, err)
		}
	}
}

// The same exception inside the stream (InvokeModelWithResponseStream
// and ConverseStream send it as a validationException event).
func TestMidStreamContextOverflow(t *testing.T) {
	body, err := providertest.EventStream([]byte(`{"messageStart":{"role":"assistant"}}
{"validationException":{"message":"Input is too long for requested model."}}
`))
	if err != nil {
		t.Fatal(err)
	}
	srv := providertest.NewServer(t, providertest.EventStreamResponse(body))
	evs := providertest.MustRun(t, newProvider(t, srv), providertest.SimpleRequest("bedrock:"+testModel))
	if e, ok := evs[len(evs)-2].(events.ErrorEvent); !ok || e.Code != "context_overflow" {
		t.Fatalf("error event %#v, want context_overflow", evs[len(evs)-2])
	}
}
