package ingest_test

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/llmworker/llmworker/internal/leaf/fixtures"
	"github.com/llmworker/llmworker/pkg/ingest"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/provider/openai"
	"github.com/llmworker/llmworker/pkg/provider/providertest"
)

type statusErr int

func (e statusErr) Error() string   { return fmt.Sprintf("provider said %d", int(e)) }
func (e statusErr) HTTPStatus() int { return int(e) }

// A provider that refuses before its first byte is an error reply that says
// which refusal it was, and no stream event is published.
func TestOpenFailuresAreErrorReplies(t *testing.T) {
	cases := []struct {
		err      error
		code     string
		sentinel error
	}{
		{statusErr(http.StatusNotFound), "404", ingest.ErrUnknownModel},
		{statusErr(http.StatusUnauthorized), "401", ingest.ErrProviderAuth},
		{statusErr(http.StatusForbidden), "401", ingest.ErrProviderAuth},
		{statusErr(http.StatusBadRequest), "400", ingest.ErrInvalidRequest},
		{statusErr(http.StatusTooManyRequests), "429", ingest.ErrRateLimited},
		{statusErr(http.StatusServiceUnavailable), "502", ingest.ErrProviderUnavailable},
		{errors.New("dial tcp: connection refused"), "502", ingest.ErrProviderUnavailable},
	}
	url := startNATS(t)
	f := &fake{}
	startService(t, url, ingest.Config{Providers: map[string]ingest.Factory{"openai": ingest.Static(f)}})
	nc := connect(t, url)
	for i, c := range cases {
		t.Run(c.err.Error(), func(t *testing.T) {
			f.mu.Lock()
			f.openErr = c.err
			f.mu.Unlock()
			id := fmt.Sprintf("o%d", i)
			sub, err := nc.SubscribeSync("llmw.llm.stream." + id)
			if err != nil {
				t.Fatal(err)
			}
			r := request(t, nc, binaryRequest("llmw.llm.complete", completionData(id, "openai:m"), nil))
			if got := r.Header.Get(micro.ErrorCodeHeader); got != c.code {
				t.Errorf("code %q, want %q", got, c.code)
			}
			if !strings.Contains(r.Header.Get(micro.ErrorHeader), c.err.Error()) {
				t.Errorf("description %q does not carry the provider's %q", r.Header.Get(micro.ErrorHeader), c.err)
			}
			if _, err := ingest.DecodeReply(r); !errors.Is(err, c.sentinel) {
				t.Errorf("DecodeReply: %v, want %v", err, c.sentinel)
			}
			if m, err := sub.NextMsg(50 * time.Millisecond); err == nil {
				t.Errorf("a stream event was published: %s", m.Header.Get("ce-type"))
			}
		})
	}
}

// The same through the real OpenAI adapter: the provider's 404 for a model
// it does not serve becomes ErrUnknownModel.
func TestUnknownModelFromRealAdapter(t *testing.T) {
	body, err := fixtures.SSE("openai-chat/single-tool-call-usage_gpt-4o-mini.sse")
	if err != nil {
		t.Fatal(err)
	}
	srv := providertest.NewServer(t,
		providertest.Status(http.StatusNotFound, "", `{"error":{"message":"The model gpt-9 does not exist","type":"invalid_request_error","code":"model_not_found"}}`),
		providertest.SSE(body))
	p, err := openai.New(openai.Config{APIKey: "test", BaseURL: srv.URL() + "/v1", MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	url := startNATS(t)
	startService(t, url, ingest.Config{Providers: map[string]ingest.Factory{"openai": ingest.Static(p)}})
	nc := connect(t, url)
	r := request(t, nc, binaryRequest("llmw.llm.complete", completionData("u1", "openai:gpt-9"), nil))
	if _, err := ingest.DecodeReply(r); !errors.Is(err, ingest.ErrUnknownModel) || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("got %v, want ErrUnknownModel with the provider's message", err)
	}
	// The next request streams.
	sub := subscribeStream(t, nc, "llmw.llm.stream.u2")
	complete(t, nc, "u2", "openai:gpt-4o-mini")
	if got := evs(sub.untilTerminal()); len(got) < 3 {
		t.Fatalf("stream too short: %v", got)
	}
}

func TestAllowModels(t *testing.T) {
	f := ingest.AllowModels(ingest.Static(&fake{}), "a", "b")
	if p, err := f("b"); err != nil || p == nil {
		t.Errorf("allowed model: %v", err)
	}
	if _, err := f("c"); !errors.Is(err, ingest.ErrUnknownModel) {
		t.Errorf("other model: %v", err)
	}
}

// A provider's context-too-long answer, through the real OpenAI adapter,
// is an error reply of kind context_overflow (400) that the client reads
// back as that kind.
func TestContextOverflowFromRealAdapter(t *testing.T) {
	srv := providertest.NewServer(t,
		providertest.Status(http.StatusBadRequest, "", `{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 133557 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`))
	p, err := openai.New(openai.Config{APIKey: "test", BaseURL: srv.URL() + "/v1", MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	url := startNATS(t)
	startService(t, url, ingest.Config{Providers: map[string]ingest.Factory{"openai": ingest.Static(p)}})
	nc := connect(t, url)
	r := request(t, nc, binaryRequest("llmw.llm.complete", completionData("c1", "openai:gpt-4o"), nil))
	if got := r.Header.Get(micro.ErrorCodeHeader); got != "400" {
		t.Errorf("code %q, want 400", got)
	}
	if got := r.Header.Get(ingest.HeaderErrorKind); got != "context_overflow" {
		t.Errorf("%s %q, want context_overflow", ingest.HeaderErrorKind, got)
	}
	_, err = ingest.DecodeReply(r)
	if !errors.Is(err, ingest.ErrContextOverflow) || !strings.Contains(err.Error(), "maximum context length is 128000 tokens") {
		t.Fatalf("got %v, want ErrContextOverflow with the provider's message", err)
	}
	if k, _ := llm.KindOf(err); k != llm.KindContextOverflow {
		t.Fatalf("kind %s, want context_overflow", k)
	}
}
