package turn

import (
	"regexp"
	"testing"
)

var kvKeyRE = regexp.MustCompile(`^[-/_=\.a-zA-Z0-9]+$`)

// FuzzKVKey: every turn or session id maps to a valid KV key, and distinct
// ids never share a key.
func FuzzKVKey(f *testing.F) {
	for _, s := range []string{"01J9ZX", "turn-1", "b64_dHVybg", "ünïcode", "a:b", "x=y", "_", "a/b"} {
		f.Add(s, s+"x")
	}
	f.Add("a:b", "b64_YTpi")
	f.Fuzz(func(t *testing.T, a, b string) {
		if a == "" || b == "" {
			return
		}
		ka, kb := kvKey(a), kvKey(b)
		if !kvKeyRE.MatchString(ka) || ka[0] == '.' || ka[len(ka)-1] == '.' {
			t.Fatalf("kvKey(%q) = %q is not a KV key", a, ka)
		}
		if a != b && ka == kb {
			t.Fatalf("kvKey(%q) == kvKey(%q) == %q", a, b, ka)
		}
	})
}

// FuzzRetryable never panics and agrees on case.
func FuzzRetryable(f *testing.F) {
	for _, s := range []string{"stream_gap", "refusal", "503", "OVERLOADED", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, code string) {
		_ = DefaultRetryable(code)
	})
}
