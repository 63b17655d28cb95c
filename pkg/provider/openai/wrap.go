package openai

import (
	"context"
	"time"

	"github.com/llmworker/llmworker/pkg/llm"
)

// Wrap puts a raw adapter stream behind llm.Normalize with the idle
// timeout, so that whatever the provider sends the result is well-formed
// and a silent provider never hangs the consumer.
func Wrap(ctx context.Context, raw llm.Stream, idle time.Duration) llm.Stream {
	return llm.Normalize(ctx, raw, llm.NormalizeOptions{IdleTimeout: idle})
}
