package turn

import (
	"context"
	"errors"
	"fmt"

	"github.com/llmworker/llmworker/pkg/agents"
	"github.com/llmworker/llmworker/pkg/events"
)

// startAgent resolves the agent a new turn's request names (TurnRequest.Agent)
// and makes req the request the turn runs: the definition's fields under
// the request's own, Agent pinned to "NAME@REV" (TurnRequest.WithAgent).
// It is called once, when the turn starts; the state keeps the resolved
// request, so a turn recovered or resumed later runs the same revision
// whatever the registry holds by then. A remote agent (a2a_url) sets
// t.children.remote: the turn runs its A2A task (remote.go). stop says
// the turn does not start: an unknown agent, or a resolved request that
// is not valid, is answered with llmw.turn.rejected and llmw.turn.failed
// (unknown_agent, invalid_request), and a remote agent on a replica
// without an A2A client (Config.RemoteAgents) with llmw.turn.failed
// (no_a2a_client); a registry that does not answer leaves the request
// to be delivered again.
func (s *Service) startAgent(t *turnRun, req *events.TurnRequest, dg string) (a answer, stop bool) {
	if req.Agent == "" {
		return answer{}, false
	}
	ctx, cancel := kvContext(s.root)
	ag, err := s.registry.Resolve(ctx, req.Agent)
	cancel()
	code, rejectCode := "", ""
	switch {
	case errors.Is(err, agents.ErrUnknownAgent), errors.Is(err, agents.ErrNotProvisioned):
		code, rejectCode = CodeUnknownAgent, events.RejectUnknownAgent
	case errors.Is(err, agents.ErrCorrupt):
		code = CodeInternal
	case err != nil:
		s.log.Warn("turn: resolve agent", "turn_id", t.id, "agent", req.Agent, "err", err)
		return retry, true
	default:
		resolved := req.WithAgent(&ag.AgentDefinition, ag.Revision)
		t.children.remote = remoteOf(&ag.AgentDefinition, req)
		if err = resolved.Validate(); err == nil && resolved.Model == "" && t.children.remote == nil {
			err = &events.FieldError{Field: "model", Problem: "is required: the agent has no model, so the request must name one"}
		}
		if err == nil && t.children.remote != nil && s.cfg.RemoteAgents == nil {
			err = fmt.Errorf("%w: agent %s is the remote agent at %s", ErrNoA2AClient, resolved.Agent, t.children.remote.URL)
			code = CodeNoA2AClient
			break
		}
		if err == nil {
			ctx, cancel := kvContext(s.root)
			t.children.pinned, err = s.pinSubAgents(ctx, ag.Agents)
			cancel()
			if err != nil {
				s.log.Warn("turn: resolve sub-agents", "turn_id", t.id, "agent", req.Agent, "err", err)
				return retry, true
			}
			*req = resolved
			return answer{}, false
		}
		err = fmt.Errorf("%w: agent %s: %w", ErrInvalidRequest, resolved.Agent, err)
		code, rejectCode = CodeInvalidRequest, events.RejectInvalidRequest
	}
	stripped := *req
	stripped.Messages = []events.Message{}
	t.base = State{Version: StateVersion, Request: &stripped, RequestDigest: dg}
	a = s.failEarly(t, code, err)
	if rejectCode != "" && a.kind == answerTerm {
		s.publishRejected(events.TurnRejected{TurnID: t.id, Request: events.TypeTurnSubmit, Code: rejectCode, Reason: err.Error()})
	}
	return a, true
}

// pinSubAgents resolves the sub-agents of the agent a new turn runs to
// their latest revisions, NAME@REV, which the turn's state keeps
// (State.SubAgents): the turn offers those whatever the registry holds
// when it is continued. A sub-agent the registry does not hold is left
// out (the definition was put with Force, or it was deleted since).
func (s *Service) pinSubAgents(ctx context.Context, names []string) ([]string, error) {
	if len(names) == 0 || s.cfg.MaxDepth < 0 {
		return nil, nil
	}
	refs := make([]string, 0, len(names))
	for _, n := range names {
		a, err := s.registry.Resolve(ctx, n)
		switch {
		case errors.Is(err, agents.ErrUnknownAgent), errors.Is(err, agents.ErrCorrupt):
			s.log.Warn("turn: a sub-agent is not offered", "agent", n, "err", err)
			continue
		case err != nil:
			return nil, err
		}
		refs = append(refs, a.Ref())
	}
	return refs, nil
}
