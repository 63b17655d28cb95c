package protocol_test

import (
	"context"
	"testing"

	"github.com/llmworker/llmworker/pkg/llm/llmtest"
	"github.com/llmworker/llmworker/pkg/tool"
	"github.com/llmworker/llmworker/pkg/turn"
)

// The stack starts and stops cleanly (the walks build on it).
func TestStackStarts(t *testing.T) {
	s := newStack(t)
	s.startIngest(llmtest.NewScripted())
	s.startTurn(turn.Config{})
	s.startToolexec(echo())
}

type echoArgs struct {
	Text string `json:"text"`
}

// echo is a tool that answers its input text.
func echo() tool.Tool {
	return tool.Must("echo", "Answers its text.", func(_ context.Context, a echoArgs) (string, error) { return a.Text, nil })
}
