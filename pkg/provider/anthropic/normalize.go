package anthropic

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"time"

	"github.com/llmworker/llmworker/pkg/events"
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

// withWarnings makes sure the stream returned says which settings were
// not sent (llm.Warner), also where Normalize's stream does not forward
// them from its source.
func withWarnings(s llm.Stream, w []events.Warning) llm.Stream {
	if len(w) == 0 {
		return s
	}
	if _, ok := s.(llm.Warner); ok {
		return s
	}
	return &warnedStream{Stream: s, warnings: w}
}

// warnedStream is a normalized stream with its warnings: still
// well-formed, and buffered as far as its source says.
type warnedStream struct {
	llm.Stream
	warnings []events.Warning
}

var (
	_ llm.Warner     = (*warnedStream)(nil)
	_ llm.WellFormed = (*warnedStream)(nil)
	_ llm.Buffered   = (*warnedStream)(nil)
)

func (s *warnedStream) Warnings() []events.Warning { return s.warnings }
func (s *warnedStream) WellFormed()                {}
func (s *warnedStream) Buffered() int {
	if b, ok := s.Stream.(llm.Buffered); ok {
		return b.Buffered()
	}
	return 0
}
