package quota_test

import (
	"errors"
	"testing"

	"github.com/llmworker/llmworker/pkg/quota"
)

// Parse reads operators' files and the bucket's config key: whatever it is
// given, it returns limits that validate or an ErrInvalidLimits, and never
// panics.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"limits: [{key: anthropic, concurrent: 5, requests_per_minute: 60}]",
		`{"window":"1s","limits":[{"key":"openai:gpt-4o","tokens_per_minute":1000,"match":["openai"]}]}`,
		"window: -1s", "limits: [{key: a}, {key: a}]", "lease_ttl: 1ns", "", "limits: 5", "{",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := quota.Parse(b)
		if err != nil {
			if !errors.Is(err, quota.ErrInvalidLimits) {
				t.Fatalf("Parse(%q): %v, not ErrInvalidLimits", b, err)
			}
			return
		}
		if err := l.Validate(); err != nil {
			t.Fatalf("Parse(%q) returned limits that do not validate: %v", b, err)
		}
		for _, x := range l.Limits {
			_ = l.For(x.Key, "m")
		}
	})
}
