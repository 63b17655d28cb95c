package turn

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/llmworker/llmworker/pkg/ingest"
	"github.com/llmworker/llmworker/pkg/worker"
)

// retryStep is the worker's worker.Config.RetryStep: a model call that
// failed for a transport reason (Config.Retryable) is made again within its
// step, at most Config.StepRetries times, after RetryBackoff doubled per
// retry up to one second. Other failures (a refusal, an invalid request)
// fail the step at once. The worker starts each attempt from nothing and
// announces it with llmw.turn.step.
func (s *Service) retryStep(f worker.StepFailure) (time.Duration, bool) {
	code := f.Code
	if f.Err != nil {
		code = openErrorCode(f.Err)
	}
	if !s.cfg.Retryable(code) {
		return 0, false
	}
	d := s.cfg.RetryBackoff << (f.Attempt - 1)
	if d > time.Second || d <= 0 {
		d = time.Second
	}
	return d, true
}

// openErrorCode classifies an error of Provider.Stream for Retryable.
func openErrorCode(err error) string {
	var ie *ingest.Error
	switch {
	case errors.Is(err, ingest.ErrNoIngest):
		// Before the context errors: a reply that did not come within
		// IngestTimeout (a request lost in a partition) wraps the
		// timeout's DeadlineExceeded, and it is worth another try.
		return codeNoIngest
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "cancelled"
	case errors.As(err, &ie):
		return strconv.Itoa(ie.Code)
	}
	return "provider_error"
}
