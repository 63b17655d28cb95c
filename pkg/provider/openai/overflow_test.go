package openai_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/provider/openai"
	"github.com/llmworker/llmworker/pkg/provider/providertest"
)

// The error answers of a context above the window, recorded from
// OpenAI-compatible servers' public reports.
var overflowAnswers = []struct {
	name   string
	status int
	body   string
}{
	// OpenAI and Azure OpenAI Chat Completions.
	{"openai", 400, `{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 133557 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`},
	// vLLM's OpenAI-compatible server (an error object at the top).
	{"vllm", 400, `{"object":"error","message":"This model's maximum context length is 32768 tokens. However, you requested 33792 tokens (33280 in the messages, 512 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400}`},
	// llama.cpp's server (ggml-org/llama.cpp#15780), which older builds
	// answer with 500.
	{"llama.cpp", 400, `{"error":{"code":400,"message":"the request exceeds the available context size. try increasing the context size or enable context shift","type":"exceed_context_size_error","n_prompt_tokens":14429,"n_ctx":8192}}`},
	{"llama.cpp 500", 500, `{"error":{"code":500,"message":"the request exceeds the available context size. try increasing the context size or enable context shift","type":"exceed_context_size_error","n_prompt_tokens":1407,"n_ctx":256}}`},
	// Ollama's OpenAI-compatible endpoint.
	{"ollama", 400, `{"error":{"message":"input length exceeds the context length","type":"invalid_request_error","param":null,"code":null}}`},
}

func TestContextOverflowAnswers(t *testing.T) {
	for _, a := range overflowAnswers {
		t.Run(a.name, func(t *testing.T) {
			srv := providertest.NewServer(t, providertest.Status(a.status, "", a.body))
			p := newProvider(t, srv)
			_, err := p.Stream(context.Background(), simpleRequest())
			kind, status, retryable, ok := llm.ClassifyError(err)
			if !ok || kind != llm.KindContextOverflow || status != a.status || retryable {
				t.Fatalf("classified %s %d retryable=%v ok=%v (%v), want context_overflow %d, not retryable", kind, status, retryable, ok, err, a.status)
			}
		})
	}
	// A 400 of another cause stays invalid_request.
	srv := providertest.NewServer(t, providertest.Status(http.StatusBadRequest, "", `{"error":{"message":"Invalid type for 'max_tokens'","type":"invalid_request_error","param":"max_tokens","code":"invalid_type"}}`))
	_, err := newProvider(t, srv).Stream(context.Background(), simpleRequest())
	if kind, _, _, _ := llm.ClassifyError(err); kind != llm.KindInvalidRequest {
		t.Fatalf("a plain invalid request classified %s", kind)
	}
}

func TestAzureContextOverflow(t *testing.T) {
	srv := providertest.NewServer(t, providertest.Status(http.StatusBadRequest, "", overflowAnswers[0].body))
	azureEnv(t, srv, "azure-key-1", "")
	p, err := openai.NewAzure(openai.AzureConfig{MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Stream(context.Background(), providertest.SimpleRequest("azure:my-gpt4o"))
	if kind, status, _, _ := llm.ClassifyError(err); kind != llm.KindContextOverflow || status != 400 {
		t.Fatalf("classified %s %d (%v), want context_overflow 400", kind, status, err)
	}
}
