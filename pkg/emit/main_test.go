package emit_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/llmworker/llmworker/pkg/natstest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, natstest.NotOurGoroutines()...)
}

// sameJSON reports whether a and b are the same JSON value (empty = {}).
func sameJSON(a, b string) bool {
	if strings.TrimSpace(a) == "" {
		a = "{}"
	}
	if strings.TrimSpace(b) == "" {
		b = "{}"
	}
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return bytes.Equal(xb, yb)
}
