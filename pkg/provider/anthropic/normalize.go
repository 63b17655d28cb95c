package anthropic

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"time"

	"github.com/llmworker/llmworker/pkg/llm"
)

// normalize wraps the translated stream. The translator already produces a
// well-formed stream and bounds its own waits (llm.SelfBounded); llm.Normalize
// is the shared safety net for what it yields.
func normalize(ctx context.Context, s llm.Stream, idle time.Duration) llm.Stream {
	return llm.Normalize(ctx, s, llm.NormalizeOptions{IdleTimeout: idle})
}

// synthID returns a unique tool-use id for a call the provider sent without
// one.
func synthID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "toolu_synth_" + hex.EncodeToString(b[:])
}
