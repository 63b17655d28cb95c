package llm

import (
	"context"
	"testing"
)

// MustStream plays the next step with a background context (tests only).
func (p *Scripted) MustStream(t *testing.T) Stream {
	t.Helper()
	s, err := p.Stream(context.Background(), &Request{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}
