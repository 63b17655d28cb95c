package turn

import (
	"regexp"
	"slices"
	"strings"
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

// FuzzRetryable: DefaultRetryable never panics, does not depend on the
// case of the code (providers spell "overloaded" and "OVERLOADED"), and
// says yes only for codes of its documented list.
func FuzzRetryable(f *testing.F) {
	for _, s := range []string{"stream_gap", "refusal", "503", "OVERLOADED", "", "Server_Error", "ünïcode"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, code string) {
		got := DefaultRetryable(code)
		// Case does not matter (for ASCII: Unicode folding can turn a
		// letter like "ſ" into another word's "s").
		ascii := !strings.ContainsFunc(code, func(r rune) bool { return r > 127 })
		if up, low := DefaultRetryable(strings.ToUpper(code)), DefaultRetryable(strings.ToLower(code)); ascii && (up != got || low != got) {
			t.Fatalf("DefaultRetryable(%q) = %v, upper %v, lower %v", code, got, up, low)
		}
		if got && !slices.Contains(retryableCodes, strings.ToLower(code)) {
			t.Fatalf("DefaultRetryable(%q) = true for a code outside the list", code)
		}
	})
}
