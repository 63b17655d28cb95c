package worker

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/timeline"
)

// Worker runs turns (docs/architecture.md#the-turn-loop): a Config plus the handlers and
// observers registered on it. A Worker is safe for concurrent use; each
// Run, Resume or RunFrom call is an independent turn with its own Timeline
// and block scopes, and handlers registered on the Worker see the events of
// every turn (use one Worker per turn for per-turn state). Handlers
// registered while a turn runs take effect from the next turn.
type Worker struct {
	cfg *resolved

	mu sync.Mutex
	h  handlers
}

// handlers are the registrations of the worker event API.
type handlers struct {
	timeline     []func(*timeline.Timeline)
	textComplete []func(events.TextComplete)
	toolComplete []func(events.ToolCallComplete)
	turnStart    []func(step int)
	turnEnd      []func(step int)
	observers    []Observer
}

func (h handlers) clone() handlers {
	return handlers{
		timeline:     slices.Clone(h.timeline),
		textComplete: slices.Clone(h.textComplete),
		toolComplete: slices.Clone(h.toolComplete),
		turnStart:    slices.Clone(h.turnStart),
		turnEnd:      slices.Clone(h.turnEnd),
		observers:    slices.Clone(h.observers),
	}
}

// Option configures a Worker beyond its Config.
type Option func(*Worker)

// WithObserver adds an Observer (as AddObserver).
func WithObserver(o Observer) Option { return func(w *Worker) { w.AddObserver(o) } }

// WithSubscriber subscribes s (as Subscribe).
func WithSubscriber[TS, US any](s Subscriber[TS, US]) Option {
	return func(w *Worker) { Subscribe(w, s) }
}

// New returns a Worker for cfg. Errors match ErrNoProvider or
// ErrInvalidConfig.
func New(cfg Config, opts ...Option) (*Worker, error) {
	r, err := resolve(cfg)
	if err != nil {
		return nil, err
	}
	w := &Worker{cfg: r}
	if cfg.Observer != nil {
		w.h.observers = append(w.h.observers, cfg.Observer)
	}
	for _, o := range opts {
		o(w)
	}
	return w, nil
}

// Tools returns the definitions of the tools offered to the model, sorted
// by name.
func (w *Worker) Tools() []events.ToolDefinition { return w.cfg.definitions() }

func (w *Worker) register(f func(h *handlers)) {
	w.mu.Lock()
	f(&w.h)
	w.mu.Unlock()
}

func (w *Worker) snapshot() handlers {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.h.clone()
}

// AddObserver adds an Observer of every worker event (docs/protocol.md §5).
func (w *Worker) AddObserver(o Observer) {
	if o == nil {
		return
	}
	w.register(func(h *handlers) { h.observers = append(h.observers, o) })
}

// OnTextBlock registers a Timeline handler for text blocks (and tool_result
// blocks of provider-run tools, told apart by BlockType) with its own
// scope type S: a fresh S per block, dropped at stop or abort.
func OnTextBlock[S any](w *Worker, h timeline.Handler[timeline.TextBlockEvent, S]) {
	onTimeline(w, func(t *timeline.Timeline) { timeline.On(t, timeline.TextBlock, h) })
}

// OnThinkingBlock registers a Timeline handler for thinking blocks.
func OnThinkingBlock[S any](w *Worker, h timeline.Handler[timeline.ThinkingBlockEvent, S]) {
	onTimeline(w, func(t *timeline.Timeline) { timeline.On(t, timeline.ThinkingBlock, h) })
}

// OnToolUseBlock registers a Timeline handler for tool_use blocks.
func OnToolUseBlock[S any](w *Worker, h timeline.Handler[timeline.ToolUseBlockEvent, S]) {
	onTimeline(w, func(t *timeline.Timeline) { timeline.On(t, timeline.ToolUseBlock, h) })
}

func onTimeline(w *Worker, reg func(*timeline.Timeline)) {
	w.register(func(h *handlers) { h.timeline = append(h.timeline, reg) })
}

// OnUsage registers f for the usage events of the model streams, as the
// provider sends them (cumulative within one response).
func (w *Worker) OnUsage(f func(events.UsageEvent)) {
	onMeta(w, timeline.Usage, f)
}

// OnStatus registers f for the status events of the model streams.
func (w *Worker) OnStatus(f func(events.StatusEvent)) {
	onMeta(w, timeline.Status, f)
}

// OnError registers f for the error events of the model streams.
func (w *Worker) OnError(f func(events.ErrorEvent)) {
	onMeta(w, timeline.Error, f)
}

func onMeta[E any](w *Worker, k timeline.Kind[E], f func(E)) {
	if f == nil {
		return
	}
	onTimeline(w, func(t *timeline.Timeline) {
		timeline.OnFunc(t, k, func(_ *struct{}, e E) { f(e) })
	})
}

// OnTextComplete registers f for every text block that stopped, with its
// whole text (after the text handlers saw the stop).
func (w *Worker) OnTextComplete(f func(events.TextComplete)) {
	if f != nil {
		w.register(func(h *handlers) { h.textComplete = append(h.textComplete, f) })
	}
}

// OnToolCallComplete registers f for every tool_use block of a local tool
// that stopped, with its whole input (after the tool_use handlers saw the
// stop). Error is set when the input is not a JSON object.
func (w *Worker) OnToolCallComplete(f func(events.ToolCallComplete)) {
	if f != nil {
		w.register(func(h *handlers) { h.toolComplete = append(h.toolComplete, f) })
	}
}

// OnTurnStart registers f to be called before each model call of a turn
// (each "turn" of the loop in docs/architecture.md#the-turn-loop), with its step from 1.
func (w *Worker) OnTurnStart(f func(step int)) {
	if f != nil {
		w.register(func(h *handlers) { h.turnStart = append(h.turnStart, f) })
	}
}

// OnTurnEnd registers f to be called when the model call of a step has
// ended (its stream read to the end, before its tools run; calls that
// started while the model streamed may be running).
func (w *Worker) OnTurnEnd(f func(step int)) {
	if f != nil {
		w.register(func(h *handlers) { h.turnEnd = append(h.turnEnd, f) })
	}
}

// Run runs a turn on messages (the conversation so far, ending with the
// user's message): on_message_send, the model call, tool calls and further
// model calls until the model answers without tools and on_turn_end lets
// the turn finish, or the turn pauses, aborts or fails.
//
// The error is non-nil only when no turn was started (ErrInvalidMessages);
// how the turn ended is in the Result (Status, Reason, Err).
func (w *Worker) Run(ctx context.Context, messages []events.Message) (*Result, error) {
	return w.RunCompacted(ctx, messages, nil)
}

// RunCompacted is Run of a conversation whose context an earlier turn
// compacted: c is that turn's Result.Compaction (or a session's stored
// one), and messages the whole transcript, c's span included. The turn
// reads c's projection and compacts further only when it needs to. A c
// that does not fit messages (c.To past their end) is
// ErrInvalidMessages.
func (w *Worker) RunCompacted(ctx context.Context, messages []events.Message, c *events.Compaction) (*Result, error) {
	return w.RunAfter(ctx, 0, messages, c)
}

// RunAfter is RunCompacted of a run that holds the transcript from
// position base on: messages are originals[base:], as a turn service
// that stores a session's transcript hands them (it reads no message
// the compaction c replaces), and Config.Originals reads the positions
// before base. base > 0 needs a c with base ≤ c.To ≤ base+len(messages)
// (Checkpoint.Base); anything else is ErrInvalidMessages. The Result's
// Messages, and llmw.turn.completed's, are the transcript from base on.
func (w *Worker) RunAfter(ctx context.Context, base int, messages []events.Message, c *events.Compaction) (*Result, error) {
	if err := events.ValidateMessages("messages", messages); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidMessages, err)
	}
	switch {
	case base < 0:
		return nil, fmt.Errorf("%w: negative base %d", ErrInvalidMessages, base)
	case c == nil && base > 0:
		return nil, fmt.Errorf("%w: base %d without a compaction", ErrInvalidMessages, base)
	case c != nil && (c.To < base || c.To > base+len(messages)):
		return nil, fmt.Errorf("%w: compaction %s covers positions [0, %d), the transcript held has positions [%d, %d)", ErrInvalidMessages, c.ID, c.To, base, base+len(messages))
	}
	id := w.cfg.TurnID
	if id == "" {
		id = NewTurnID()
	}
	st := &Checkpoint{
		Version: CheckpointVersion, TurnID: id, SessionID: w.cfg.SessionID, Phase: PhaseModel,
		Messages: cloneMessages(messages), Vars: cloneVars(w.cfg.Vars), Compaction: cloneCompaction(c), Base: base,
	}
	r := w.newRun(st)
	return r.traced(ctx, func(ctx context.Context) *Result {
		r.em.emit(events.TurnStarted{TurnID: id, SessionID: st.SessionID, Model: w.cfg.Model})
		return r.loop(ctx)
	}), nil
}

// RunFrom continues a turn from a checkpoint that Config.Checkpoint
// received (possibly in another process, with a Worker of the same
// configuration): tool calls whose results (or outputs) are in the
// checkpoint are not run again, a model call that was under way is made
// again. A paused checkpoint pauses again at once (use Resume to settle it).
// The turn starts with llmw.turn.started {"resumed": true}. Errors match
// ErrInvalidCheckpoint.
func (w *Worker) RunFrom(ctx context.Context, cp *Checkpoint) (*Result, error) {
	if err := cp.Validate(); err != nil {
		return nil, err
	}
	st := cp.Clone()
	st.Restarts++
	r := w.newRun(st)
	return r.traced(ctx, func(ctx context.Context) *Result {
		r.em.emit(events.TurnStarted{TurnID: st.TurnID, SessionID: st.SessionID, Model: w.cfg.Model, Resumed: true})
		return r.loop(ctx)
	}), nil
}

// Resume continues a paused turn (Result.State, or a paused checkpoint).
//
// At a before_tool_call pause, decisions settle the paused calls by call
// id: approve runs the call as the model made it, an edit runs it with the
// edited input, deny answers the model with an error result (with the
// decision's reason). before_tool_call hooks are not asked again for
// settled calls; after_tool_call hooks run for every call that runs. Calls
// that were allowed before the pause run now. Paused calls without a
// decision keep the turn paused. extra messages are added after the tool
// results.
//
// At an on_turn_end pause there are no calls to decide: with extra
// messages the turn goes on with another model call, without them it
// completes.
//
// The turn goes on with llmw.turn.resumed. Errors (nothing is sent then)
// match ErrInvalidCheckpoint, ErrNotPaused, ErrInvalidDecision or
// ErrInvalidMessages.
func (w *Worker) Resume(ctx context.Context, state *Checkpoint, decisions map[string]events.Decision, extra ...events.Message) (*Result, error) {
	if err := state.Validate(); err != nil {
		return nil, err
	}
	if state.Phase != PhasePaused {
		return nil, fmt.Errorf("%w: phase is %q", ErrNotPaused, state.Phase)
	}
	if err := events.ValidateMessages("messages", extra); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidMessages, err)
	}
	if err := checkDecisions(state, decisions); err != nil {
		return nil, err
	}
	st := state.Clone()
	st.Restarts++
	r := w.newRun(st)
	return r.traced(ctx, func(ctx context.Context) *Result {
		r.em.emit(events.TurnResumed{Decisions: decisions})
		if res := r.applyDecisions(ctx, decisions, cloneMessages(extra)); res != nil {
			return res
		}
		return r.loop(ctx)
	}), nil
}

func cloneVars(v map[string]string) map[string]string {
	if v == nil {
		return nil
	}
	out := make(map[string]string, len(v))
	for k, x := range v {
		out[k] = x
	}
	return out
}
