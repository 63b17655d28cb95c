package turn

import (
	"errors"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/price"
	"github.com/llmworker/llmworker/pkg/worker"
)

// modelOptions are the request's model options for every model call of
// the turn, with OpenAI's prompt cache key defaulting to the session id,
// else the turn id, so that the steps of a turn, and the turns of a
// session, share a cache. They come from the turn request kept in the
// turn's state, so a turn continued on another replica keeps them.
func modelOptions(t *turnRun, req *events.TurnRequest) events.ModelOptions {
	o := req.ModelOptions
	if o.CacheKey == "" && o.CacheEnabled() {
		o.CacheKey = t.session
		if o.CacheKey == "" {
			o.CacheKey = t.id
		}
	}
	return o
}

// outputRepairs is the request's output_repairs as the worker's bound.
func outputRepairs(req *events.TurnRequest) int {
	if n := req.Repairs(); n > 0 {
		return n
	}
	return worker.NoRepairs
}

// workerCode is the code of a turn whose worker could not be built: the
// request's fault when a field of it is wrong (a tool_choice naming a
// tool the turn does not offer, a response_format schema that does not
// compile), else internal.
func workerCode(err error) string {
	var fe *events.FieldError
	if errors.Is(err, worker.ErrInvalidConfig) && errors.As(err, &fe) {
		return CodeInvalidRequest
	}
	return CodeInternal
}

// prices is the price table in force (nil without Config.Prices).
func (s *Service) prices() *price.Table {
	if s.cfg.Prices == nil {
		return nil
	}
	return s.cfg.Prices.Table()
}

// maxToolResult bounds a tool result with media by what one NATS message
// holds, less room for the rest of the turn's state: a result above it is
// an error result naming the tool, not a checkpoint too large to store.
func (s *Service) maxToolResult() int {
	n := int(s.nc.MaxPayload())
	if n <= 0 {
		return 0
	}
	return n - min(n/4, 64<<10)
}
