package turn

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/llmworker/llmworker/pkg/events"
)

// resume continues a paused turn with the decisions of a resume request.
func (s *Service) resume(t *turnRun, st *State, rev uint64, req *events.ResumeRequest) answer {
	t.w.rev.Store(rev)
	t.base = State{Version: StateVersion, Request: st.Request, RequestDigest: st.RequestDigest, SessionPrefix: st.SessionPrefix, SessionCompaction: st.SessionCompaction, SubAgents: st.SubAgents, SubAgentCalls: st.SubAgentCalls, Remote: st.Remote}
	if st.Request == nil || st.Checkpoint == nil {
		t.ep = s.turnEvents(t.id, "")
		return s.failRun(t, CodeInternal, fmt.Errorf("the checkpoint of turn %q cannot be resumed (no request or worker state)", t.id))
	}
	t.session = st.Request.SessionID
	seqs, err := s.loadCheckpoint(s.root, st)
	if err != nil {
		if transcriptLost(err) {
			t.ep = s.turnEvents(t.id, t.session)
			return s.failRun(t, CodeInternal, err)
		}
		s.log.Warn("turn: read the transcript of a paused turn", "turn_id", t.id, "err", err)
		return retry
	}
	t.startFrom(st, seqs)
	if err := checkResume(st, req); err != nil {
		return s.termRejected(events.TurnRejected{TurnID: t.id, Request: events.TypeTurnResume, Code: events.RejectInvalidRequest,
			Status: string(StatusPaused), Reason: fmt.Sprintf("%v; the turn is still paused", err)})
	}
	t.ep = s.turnEvents(t.id, t.session)
	claim := *st
	claim.Status, claim.Owner, claim.Updated = StatusRunning, s.cfg.Instance, time.Now().UTC()
	if err := t.writeClaim(&claim); err != nil {
		if isConflict(err) {
			return s.resumeLost(t.id)
		}
		return retry
	}
	if st.Remote != nil {
		return t.resumeRemote(st, req)
	}
	tools, err := s.selectTools(s.root, st.Request.Tools)
	if err != nil {
		return s.failRun(t, CodeUnknownTool, err)
	}
	w, err := s.newWorker(t, st.Request, tools)
	if err != nil {
		return s.failRun(t, workerCode(err), err)
	}
	t.noteChildren(st.Checkpoint)
	res, err := w.Resume(t.ctx, st.Checkpoint, req.Decisions, req.Messages...)
	if err != nil {
		// The worker refused the resume before it published anything: the
		// turn is paused again as it was, and the client told why.
		back := *st
		back.Owner, back.Updated = s.cfg.Instance, time.Now().UTC()
		if werr := t.writeClaim(&back); werr != nil {
			return afterWrite(werr, leave)
		}
		return s.termRejected(events.TurnRejected{TurnID: t.id, Request: events.TypeTurnResume, Code: events.RejectInvalidRequest,
			Status: string(StatusPaused), Reason: fmt.Sprintf("%v; the turn is still paused", err)})
	}
	return t.finish(res, nil)
}

// resumeLost answers a resume whose claim of a paused turn conflicted: a
// resume handled by another replica claimed it first. The client is told
// the turn is not paused, unless it is paused again (that resume was
// refused), when the request is looked at again in a moment.
func (s *Service) resumeLost(id string) answer {
	kctx, cancel := kvContext(s.root)
	st, _, err := s.leaderState(kctx, id)
	cancel()
	switch {
	case err != nil:
		return retry
	case st.Status == StatusPaused:
		return retrySoon
	}
	return s.answerExisting(id, st, actNotPaused)
}

// checkResume says why req cannot continue the paused turn st, before the
// turn is claimed: decisions for calls that do not wait, no decision while
// calls wait, or a decision of no known kind. (The worker checks the
// decisions again, and an edit's input.)
func checkResume(st *State, req *events.ResumeRequest) error {
	if st.Remote != nil {
		return checkRemoteResume(st, req)
	}
	cp := st.Checkpoint
	if cp.Pause != nil && cp.Pause.Event == events.HookOnTurnEnd {
		if len(req.Decisions) > 0 {
			return fmt.Errorf("decisions: the turn paused at %s, which has no tool calls to decide; resume it with messages only", events.HookOnTurnEnd)
		}
		return nil
	}
	var waiting []string
	for _, c := range cp.Awaiting() {
		waiting = append(waiting, c.ID)
	}
	if len(req.Decisions) == 0 && len(waiting) > 0 {
		return fmt.Errorf("decisions is empty: the turn waits for a decision on %s", strings.Join(waiting, ", "))
	}
	ids := make([]string, 0, len(req.Decisions))
	for id := range req.Decisions {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		if !slices.Contains(waiting, id) {
			return fmt.Errorf("decisions: no call %q waits for a decision (waiting: %s)", id, strings.Join(waiting, ", "))
		}
		switch k := req.Decisions[id].Kind; k {
		case events.DecisionApprove, events.DecisionDeny, events.DecisionEdit:
		default:
			return fmt.Errorf("decisions: call %q: unknown decision %q (approve, deny or edit)", id, k)
		}
	}
	return nil
}
