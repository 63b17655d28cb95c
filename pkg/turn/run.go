package turn

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/llmworker/llmworker/pkg/emit"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/transcript"
	"github.com/llmworker/llmworker/pkg/worker"
)

// turnRun is one turn being handled by this replica: its request, its
// context, its life (phase.go), its event publisher and the state of its
// writes; the groups below each hold one concern's fields.
type turnRun struct {
	s       *Service
	id      string
	session string
	msg     *request
	ctx     context.Context
	cancelF context.CancelCauseFunc
	life    runLife

	ep   *emit.EventPublisher
	base State // request and session prefix of the checkpoints

	w        runWrites     // the state writes in order (checkpoint.go)
	tx       runTranscript // the run's transcript (transcripts.go)
	obs      observed      // what Observe adds to or drops from the worker's events
	children runChildren   // the sub-agents and their calls (children.go)
	ending   endOverride   // what replaces the worker's end
}

// runWrites is the write path's state: the run's state writes go one at
// a time and in order (queue), and its fence waits for them and for its
// events (fence).
type runWrites struct {
	// mu orders the run's state writes and is held while one is made
	// (queue); err is the first that failed (guarded by mu).
	mu  sync.Mutex
	err error
	// rev is the revision of the state this run wrote last.
	rev atomic.Uint64
	// fenceSeq is the seq of the last event published that the run's
	// fence waits for: every event but llmw.tool.started (emit).
	fenceSeq atomic.Uint64
	// committed is the id of the last compaction made by the turn that a
	// checkpoint of the run stored (checkpoint).
	committed string
}

// runTranscript is the run's transcript (StateTranscript), guarded by
// runWrites.mu once the run writes.
type runTranscript struct {
	// sess and turn are the session's transcript it started from, and
	// its own as stored so far; tail is the stream sequence of the last
	// message on the turn's subject (known once read or appended).
	sess, turn transcript.Ref
	tail       uint64
	tailKnown  bool
	// base is the run's checkpoint Base (the session's position its
	// messages start at, the active compaction's To when the turn
	// started); start and seqs are where the session's items
	// [base, sess.Len) were read (StateTranscript.SessionStart,
	// sessionEnd.seqs); compaction is the active compaction of the
	// run's last checkpoint.
	base       int
	start      uint64
	seqs       []uint64
	compaction *events.Compaction
}

// observed is what Observe adds to the worker's events or drops from
// them.
type observed struct {
	// input is the request's messages, for the turn's first
	// llmw.turn.started (nil for a turn picked up from a checkpoint).
	input []events.Message
	// claimed: takeOver published llmw.turn.started (resumed) itself, so
	// the worker's is dropped.
	claimed bool
	// published: what the previous owner published (takeOver's scan),
	// not published again.
	published
}

// runChildren is the run's sub-agents: pinned are those startAgent
// resolved (State.SubAgents); subAgents the tools of the base's, by
// name, and childCalls the place of each sub-agent call among the
// turn's (children.go), both guarded by mu; tree is the run's account
// in its tree's ledger (tree.go), nil for a turn outside a tree.
type runChildren struct {
	pinned     []string
	mu         sync.Mutex
	remote     *RemoteRun // the remote agent startAgent resolved (State.Remote)
	subAgents  map[string]*subAgentTool
	childCalls map[string]int
	tree       *treeBudget
}

func (t *turnRun) currentMsg() *request { return t.msg }

func (t *turnRun) cancel(cause error) { t.cancelF(cause) }

// handOff stops the run without a trace: nothing more is published or
// written, and the request is negatively acknowledged so another replica
// resumes the turn from its checkpoint.
func (t *turnRun) handOff(cause error) {
	t.life.enter(phaseHandedOff)
	t.cancelF(cause)
}

var _ worker.Observer = (*turnRun)(nil)

// storeSession appends the turn's messages to its session (the returned
// end, always nil, would replace completed: a session's transcript has
// no size limit).
func (t *turnRun) storeSession(msgs []events.Message) *events.TurnEnded {
	t.w.mu.Lock()
	e := &sessionEnd{turnID: t.id, from: t.base.SessionPrefix, base: t.tx.base, start: t.tx.start, seqs: t.tx.seqs, compaction: t.tx.compaction}
	t.w.mu.Unlock()
	if n := e.from - e.base; n >= 0 && n <= len(msgs) { // msgs are the transcript from base on
		msgs = msgs[n:]
	}
	e.added = msgs
	if t.base.Request != nil {
		e.config = t.base.Request.Compaction
	}
	kctx, cancel := kvContext(t.s.root)
	defer cancel()
	if err := storeSession(kctx, t.s.nc, t.s.pub.APIPrefix(), t.s.sessionKV, t.s.tx, t.session, e); err != nil {
		t.s.log.Error("turn: store session transcript", "session_id", t.session, "turn_id", t.id, "err", err)
	}
	return nil
}

// startFrom sets the run's transcript from a state it continues (seqs
// as loadCheckpoint returned them): the refs a state with
// StateTranscript names, none for the inline format (its messages are
// the turn's own, and its first write stores them).
func (t *turnRun) startFrom(st *State, seqs []uint64) {
	t.tx.sess, t.tx.turn, t.tx.tail, t.tx.tailKnown = transcript.Ref{}, transcript.Ref{}, 0, false
	t.tx.start, t.tx.seqs, t.tx.base, t.tx.compaction = 0, seqs, 0, nil
	if st.Transcript != nil {
		t.tx.sess, t.tx.start, t.tx.turn = st.Transcript.Session, st.Transcript.SessionStart, st.Transcript.Turn
	}
	if st.Checkpoint != nil {
		t.tx.base, t.tx.compaction = st.Checkpoint.Base, st.Checkpoint.Compaction
	}
}
