package anthropic

import (
	"strconv"
	"strings"
)

// claudeVersion reads the generation of a Claude model name: 3.5 of
// "claude-3-5-sonnet-20241022", 4.0 of "claude-sonnet-4-20250514", 4.5 of
// "claude-haiku-4-5" (also behind a prefix such as Bedrock's
// "anthropic."). ok is false for a name without one.
func claudeVersion(model string) (major, minor int, ok bool) {
	i := strings.Index(model, "claude-")
	if i < 0 {
		return 0, 0, false
	}
	found := false
	for _, tok := range strings.Split(model[i+len("claude-"):], "-") {
		n, err := strconv.Atoi(strings.SplitN(tok, "@", 2)[0])
		if err != nil {
			if found {
				break
			}
			continue
		}
		if !found {
			major, found = n, true
			continue
		}
		if n < 100 { // not a date
			minor = n
		}
		break
	}
	return major, minor, found
}

// atLeast reports whether model is of generation major.minor or later; a
// name without a generation is taken as a model newer than this table.
func atLeast(model string, major, minor int) bool {
	ma, mi, ok := claudeVersion(model)
	if !ok {
		return true
	}
	return ma > major || ma == major && mi >= minor
}

// nativeStructuredOutput reports whether the model has structured outputs
// (output_config.format): Claude 4.1 and later. Earlier models get the
// forced output tool.
func nativeStructuredOutput(model string) bool { return atLeast(model, 4, 1) }

// adaptiveThinking reports whether the model thinks adaptively with an
// effort level (thinking {"type":"adaptive"}, output_config.effort):
// Claude 4.6 and later. Earlier models think with a token budget.
func adaptiveThinking(model string) bool { return atLeast(model, 4, 6) }
