package turn

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/llmworker/llmworker/pkg/events"
)

// A model call's request id that would be too long for ingest is replaced
// by one that is short, a subject token, and as distinct as the ids it
// replaces.
func TestShortRequestID(t *testing.T) {
	long := strings.Repeat("é", 127) + "x" // 255 bytes, a character cut at every odd byte
	seen := map[string]string{}
	for _, id := range []string{long + "-1", long + "-2", long + "-1-a2", long + "-1-r1abc", strings.Repeat("t", 256) + "-12"} {
		got := shortRequestID(id)
		if len(got)+len("-l") > 256 || len(got) > maxRequestID || !events.ValidToken(got) || !utf8.ValidString(got) {
			t.Fatalf("shortRequestID(%d bytes) = %q (%d bytes)", len(id), got, len(got))
		}
		if prev, dup := seen[got]; dup {
			t.Fatalf("%q and %q both map to %q", prev, id, got)
		}
		seen[got] = id
	}
}
