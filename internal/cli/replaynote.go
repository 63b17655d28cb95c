package cli

import (
	"fmt"
	"strings"

	"github.com/llmworker/llmworker/internal/replay"
	"github.com/llmworker/llmworker/pkg/events"
)

// replayScenario returns the scenario a replay model plays; ok is false
// for a model of another provider, err set for a replay model that names
// no scenario.
func replayScenario(model string) (sc replay.Scenario, ok bool, err error) {
	provider, name := events.SplitModel(model)
	if provider != replay.Prefix {
		return replay.Scenario{}, false, nil
	}
	sc, err = replay.Lookup(name)
	if err != nil {
		return replay.Scenario{}, true, fmt.Errorf("%w: %v", ErrUsage, err)
	}
	return sc, true, nil
}

// replayNotice is what every command running a replay model says once
// before the turn: that it is a recording, which one, and that it answers
// the recorded question whatever the prompt (when the prompt is another).
func replayNotice(out *Renderer, sc replay.Scenario, prompt string) {
	out.line(out.style(ansiCyan, "▶ "+replay.Label+" · scenario "+sc.Name+" · tools run for real with demo data"))
	if strings.TrimSpace(prompt) != sc.Prompt {
		out.line(out.style(ansiDim, fmt.Sprintf("(a replay answers what was recorded, whatever you ask: the question %q)", sc.Prompt)))
	}
}
