package compact

import "github.com/llmworker/llmworker/pkg/events"

// Estimator estimates the input tokens of messages. The policy asks it
// for single messages (to choose what to compact) and for whole
// projections; it must be additive enough that the sum of the parts is
// about the whole.
type Estimator func(msgs []events.Message) int64

// EstimateText is Estimator e of a text (a system prompt, tool
// definitions' JSON) as one message.
func EstimateText(e Estimator, text string) int64 {
	if text == "" {
		return 0
	}
	return e([]events.Message{events.UserText(text)})
}
