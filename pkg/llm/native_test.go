package llm_test

import (
	"testing"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
)

// A provider-native compaction block is a thinking part whose signature
// begins with the prefix (docs/protocol.md §5 "Compaction"); only the
// adapters that compact natively are asked to.
func TestNativeCompaction(t *testing.T) {
	block := events.Part{Type: events.PartThinking, Signature: llm.NativeCompactionSignature(`{"t":"x"}`)}
	if data, ok := llm.NativeCompactionData(&block); !ok || data != `{"t":"x"}` {
		t.Errorf("NativeCompactionData = %q, %v", data, ok)
	}
	for _, p := range []events.Part{
		events.ThinkingPart("", "sig"),
		{Type: events.PartText, Signature: llm.NativeCompactionSignature("x")},
	} {
		if _, ok := llm.NativeCompactionData(&p); ok {
			t.Errorf("%+v read as a compaction block", p)
		}
	}
	m := events.Message{Role: events.RoleAssistant, Content: []events.Part{events.TextPart("a"), block}}
	if !llm.HasNativeCompaction(&m) || llm.HasNativeCompaction(&events.Message{Content: []events.Part{events.TextPart("a")}}) {
		t.Error("HasNativeCompaction")
	}
	for prefix, want := range map[string]bool{"anthropic": true, "openai-responses": true, "openai": false, "vertex-anthropic": false, "gemini": false} {
		if got := llm.CompactsNatively(prefix); got != want {
			t.Errorf("CompactsNatively(%q) = %v, want %v", prefix, got, want)
		}
	}
}
