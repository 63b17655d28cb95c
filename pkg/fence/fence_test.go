package fence_test

import (
	"context"
	"errors"
	"testing"

	"github.com/llmworker/llmworker/pkg/fence"
)

func TestCheck(t *testing.T) {
	ctx := context.Background()
	if err := fence.Check(ctx); err != nil {
		t.Fatalf("no fence: %v", err)
	}
	lost := errors.New("lost")
	calls := 0
	fenced := fence.With(ctx, func(context.Context) error { calls++; return lost })
	type k struct{}
	derived := context.WithValue(fenced, k{}, 1) // a hook's timeout context, say
	if err := fence.Check(derived); !errors.Is(err, lost) || calls != 1 {
		t.Fatalf("Check = %v after %d calls; want the fence's error after 1", err, calls)
	}
	if err := fence.Check(fence.With(fenced, nil)); err != nil {
		t.Fatalf("removed fence: %v", err)
	}
}
