package turn

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/ingest"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/worker"
)

// maxRequestID bounds the request id of a model call. The worker derives
// it from the turn id (<turn_id>-<step>, an attempt and a restart added),
// and ingest adds a suffix of its own, while the id must stay one subject
// token (at most 256 bytes): a turn id of the longest length
// docs/protocol.md allows would make it longer.
const maxRequestID = 200

// shortRequestIDs is the service's provider: a request id longer than
// maxRequestID is replaced by its head and a digest of the whole id, as
// unique as the id it replaces.
type shortRequestIDs struct{ p llm.Provider }

func (s shortRequestIDs) Stream(ctx context.Context, req *llm.Request) (llm.Stream, error) {
	if len(req.RequestID) <= maxRequestID {
		return s.p.Stream(ctx, req)
	}
	r := *req
	r.RequestID = shortRequestID(req.RequestID)
	return s.p.Stream(ctx, &r)
}

// shortRequestID is id's first bytes (whole characters) and the hex of
// its SHA-256's first 16 bytes.
func shortRequestID(id string) string {
	sum := sha256.Sum256([]byte(id))
	head := id[:maxRequestID-1-2*16]
	for len(head) > 0 && !utf8.ValidString(head) {
		head = head[:len(head)-1]
	}
	return head + "-" + hex.EncodeToString(sum[:16])
}

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

// fallback is the worker's worker.Config.Fallback: a step whose calls
// failed before their first block goes on with the next fallback model
// when the failure is one a retry may get past (Config.Retryable) or a
// rate limit, which the provider's SDK has retried already. An invalid
// request, a refusal or missing credentials would fail on the next model
// the same way, or say something the turn's client must act on.
func (s *Service) fallback(f worker.StepFailure) bool {
	code := f.Code
	if f.Err != nil {
		code = openErrorCode(f.Err)
	}
	return s.cfg.Retryable(code) || slices.Contains(rateLimitCodes, strings.ToLower(code))
}

// rateLimitCodes are the codes of a rate limit: ingest's error reply
// (429, rate_limited) and the stream error events of the providers.
var rateLimitCodes = []string{"429", string(ingest.KindRateLimited), "rate_limit_error", "rate_limit_exceeded"}

// fallbackModels is the fallback list of a turn request: its own, else
// Config.FallbackModels without the request's model.
func (s *Service) fallbackModels(req *events.TurnRequest) []string {
	if req.FallbackModels != nil {
		return req.FallbackModels
	}
	var out []string
	for _, m := range s.cfg.FallbackModels {
		if m != req.Model {
			out = append(out, m)
		}
	}
	return out
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
