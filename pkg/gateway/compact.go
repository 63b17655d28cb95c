package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/llmworker/llmworker/pkg/compact"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/turn"
)

// CompactRequest is the body of POST /api/chat/{id}/compact (optional):
// the model to compact the session for, one of the gateway's models (""
// = the model of the session's last turn).
type CompactRequest struct {
	Model string `json:"model,omitempty"`
}

// CompactAnswer is the answer of POST /api/chat/{id}/compact: the
// compaction the session took, null when there was nothing to compact.
type CompactAnswer struct {
	Compaction *events.Compaction `json:"compaction"`
}

// compactTimeout bounds a compaction asked for over HTTP: the summarizer's
// calls are model calls.
const compactTimeout = 5 * time.Minute

// handleCompact is POST /api/chat/{id}/compact: the session is compacted
// at once by a turn service replica (turn.Client.CompactSession, as
// `llmworker session compact ID`), and keeps the compaction; its next
// turn reads it. The originals stay.
func (g *Gateway) handleCompact(w http.ResponseWriter, r *http.Request) {
	session := r.PathValue("id")
	if !events.ValidToken(session) {
		writeError(w, badf("chat id: must be 1-256 characters without '.', '*', '>' or spaces, got %q", session))
		return
	}
	if err := g.authorize(r, session, Write); err != nil {
		writeError(w, err)
		return
	}
	var req CompactRequest
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 64<<10))
	if err != nil {
		writeError(w, badf("body: %v", err))
		return
	}
	if len(strings.TrimSpace(string(body))) > 0 {
		dec := json.NewDecoder(strings.NewReader(string(body)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			writeError(w, badf("body: not {\"model\": \"provider:model\"}: %v", err))
			return
		}
	}
	if req.Model != "" && !slices.Contains(g.cfg.Models, req.Model) {
		writeError(w, badf("model: %q is not offered here (one of %s)", req.Model, strings.Join(g.cfg.Models, ", ")))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), compactTimeout)
	defer cancel()
	c, err := g.tc.CompactSession(ctx, session, req.Model)
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, CompactAnswer{Compaction: c})
	case errors.Is(err, turn.ErrNoSession):
		writeError(w, fmt.Errorf("%w: no session %q (none of its turns completed, or it expired): %w", ErrNotFound, session, err))
	case errors.Is(err, turn.ErrCompactionConflict):
		writeError(w, fmt.Errorf("%w: %w", ErrConflict, err))
	case errors.Is(err, compact.ErrOverflow):
		writeError(w, fmt.Errorf("%w: %w", ErrNothingToCompact, err))
	case errors.Is(err, turn.ErrSessionModel), errors.Is(err, events.ErrInvalid):
		writeError(w, fmt.Errorf("%w: %w", ErrBadRequest, err))
	case errors.Is(err, nats.ErrNoResponders):
		writeError(w, fmt.Errorf("%w: no turn service answers %s", ErrUnavailable, g.subj.SessionCompact(session)))
	default:
		writeError(w, err)
	}
}

// Compact compacts the session at once (POST /api/chat/{id}/compact) for
// model ("" = the model of its last turn) and returns the compaction it
// took, nil when there was nothing to compact.
func (c *Client) Compact(ctx context.Context, chatID, model string) (*events.Compaction, error) {
	var body []byte
	if model != "" {
		body, _ = json.Marshal(CompactRequest{Model: model})
	}
	resp, err := c.do(ctx, http.MethodPost, "/api/chat/"+url.PathEscape(chatID)+"/compact", body)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var a CompactAnswer
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
		return nil, fmt.Errorf("gateway: compact %s: %w", chatID, err)
	}
	return a.Compaction, nil
}
