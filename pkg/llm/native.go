package llm

import (
	"strings"

	"github.com/llmworker/llmworker/pkg/events"
)

// NativeCompactionPrefix begins the signature of a thinking block that
// carries a provider-native compaction (events.NativeCompaction): the
// provider's compaction block, opaque to everything but the adapter that
// made it, which packs it after the prefix. The block has no thinking
// text (the provider's summary is not streamed as the assistant's), so
// it reaches the transcript as a redacted thinking part with the
// adapter's Origin: a provider of another origin never reads it
// (ForProvider; compact.Project gives it only to the origin of the
// active provider-native compaction it begins), one of the same origin
// sends it back as it came.
const NativeCompactionPrefix = "llmw.compaction:"

// NativeCompactionSignature is the block-stop signature of a compaction
// block whose provider data is data.
func NativeCompactionSignature(data string) string { return NativeCompactionPrefix + data }

// NativeCompactionData reports whether p is a provider-native compaction
// block and returns the provider's data.
func NativeCompactionData(p *events.Part) (string, bool) {
	if p.Type != events.PartThinking {
		return "", false
	}
	return strings.CutPrefix(p.Signature, NativeCompactionPrefix)
}

// HasNativeCompaction reports whether m holds a provider-native
// compaction block.
func HasNativeCompaction(m *events.Message) bool {
	for i := range m.Content {
		if _, ok := NativeCompactionData(&m.Content[i]); ok {
			return true
		}
	}
	return false
}

// nativeCompactors are the provider prefixes whose adapters compact
// natively (pkg/provider/anthropic: the Messages API's compact_20260112
// context-management edit; pkg/provider/openairesponses: the Responses
// API's context_management compaction).
var nativeCompactors = map[string]bool{"anthropic": true, "openai-responses": true}

// CompactsNatively reports whether the adapter of provider (a model
// string's prefix) honours events.CompletionRequest.Compaction.
func CompactsNatively(provider string) bool { return nativeCompactors[provider] }
