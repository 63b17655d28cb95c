package hook

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llmworker/llmworker/pkg/events"
)

// Chain holds the hooks of the five hook points and runs them. The zero
// value is an empty chain ready to use; it is safe for concurrent use.
// Each Run takes a snapshot of its hook point's hooks, so hooks added or
// removed while a turn runs take effect at the next hook point.
type Chain struct {
	// Timeout is the timeout of hooks registered without one: 0 means
	// DefaultTimeout, negative means none. Set it before the chain is used.
	Timeout time.Duration

	mu    sync.Mutex // serializes registration; runs never take it
	seq   int64      // highest Seq so far
	names map[string]events.HookEvent

	send   point[MessageSendInput, MessageSendResult]
	before point[ToolCallInput, BeforeToolCallResult]
	after  point[ToolResultInput, AfterToolCallResult]
	end    point[TurnEndInput, TurnEndResult]
	abort  point[AbortInput, AbortResult]
}

// point is the copy-on-write hook list of one hook point: runs load the
// current slice without locking and never see it change.
type point[In, Out any] struct {
	list atomic.Pointer[[]*entry[In, Out]]
}

type entry[In, Out any] struct {
	h    Hook[In, Out]
	info Info
	re   *regexp.Regexp
	ord  uint64 // insertion order, breaks ties of equal (Priority, Seq)
}

var insertions atomic.Uint64

// OnMessageSend registers an on_message_send hook.
func (c *Chain) OnMessageSend(h Hook[MessageSendInput, MessageSendResult], o Options) error {
	return register(c, &c.send, events.HookOnMessageSend, h, o)
}

// BeforeToolCall registers a before_tool_call hook.
func (c *Chain) BeforeToolCall(h Hook[ToolCallInput, BeforeToolCallResult], o Options) error {
	return register(c, &c.before, events.HookBeforeToolCall, h, o)
}

// AfterToolCall registers an after_tool_call hook.
func (c *Chain) AfterToolCall(h Hook[ToolResultInput, AfterToolCallResult], o Options) error {
	return register(c, &c.after, events.HookAfterToolCall, h, o)
}

// OnTurnEnd registers an on_turn_end hook.
func (c *Chain) OnTurnEnd(h Hook[TurnEndInput, TurnEndResult], o Options) error {
	return register(c, &c.end, events.HookOnTurnEnd, h, o)
}

// OnAbort registers an on_abort hook.
func (c *Chain) OnAbort(h Hook[AbortInput, AbortResult], o Options) error {
	return register(c, &c.abort, events.HookOnAbort, h, o)
}

func register[In, Out any](c *Chain, p *point[In, Out], ev events.HookEvent, h Hook[In, Out], o Options) error {
	if h == nil {
		return ErrNilHook
	}
	failure := o.Failure
	switch failure {
	case "":
		failure = events.FailClosed
	case events.FailClosed, events.FailOpen:
	default:
		return fmt.Errorf("%w: failure policy must be fail_open or fail_closed, got %q", ErrInvalidOptions, o.Failure)
	}
	var re *regexp.Regexp
	if o.Matcher != "" {
		var err error
		if re, err = regexp.Compile(o.Matcher); err != nil {
			return fmt.Errorf("%w %q: %w", ErrInvalidMatcher, o.Matcher, err)
		}
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	seq := o.Seq
	if o.Name != "" {
		if _, dup := c.names[o.Name]; dup {
			if !o.Replace {
				return fmt.Errorf("%w: %q", ErrDuplicateName, o.Name)
			}
			if seq == 0 {
				// A replaced hook keeps its place among equal priorities.
				seq = c.seqOfLocked(o.Name)
			}
			c.removeLocked(o.Name)
		}
	}
	if seq == 0 {
		seq = c.seq + 1
	}
	c.seq = max(c.seq, seq)
	name := o.Name
	if name == "" {
		name = string(ev) + "-" + strconv.FormatInt(seq, 10)
		for n := 2; c.names[name] != ""; n++ {
			name = string(ev) + "-" + strconv.FormatInt(seq, 10) + "." + strconv.Itoa(n)
		}
	}
	e := &entry[In, Out]{h: h, re: re, ord: insertions.Add(1), info: Info{
		Name: name, Event: ev, Priority: o.Priority, Matcher: o.Matcher,
		Timeout: o.Timeout, Failure: failure, Seq: seq,
	}}
	var list []*entry[In, Out]
	if old := p.list.Load(); old != nil {
		list = slices.Clone(*old)
	}
	list = append(list, e)
	slices.SortStableFunc(list, func(a, b *entry[In, Out]) int {
		return cmp.Or(cmp.Compare(a.info.Priority, b.info.Priority),
			cmp.Compare(a.info.Seq, b.info.Seq), cmp.Compare(a.ord, b.ord))
	})
	p.list.Store(&list)
	if c.names == nil {
		c.names = map[string]events.HookEvent{}
	}
	c.names[name] = ev
	return nil
}

// Remove unregisters the hook of that name and reports whether there was
// one. A hook point already running keeps its snapshot.
func (c *Chain) Remove(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.removeLocked(name)
}

func (c *Chain) removeLocked(name string) bool {
	ev, ok := c.names[name]
	if !ok {
		return false
	}
	delete(c.names, name)
	switch ev {
	case events.HookOnMessageSend:
		without(&c.send, name)
	case events.HookBeforeToolCall:
		without(&c.before, name)
	case events.HookAfterToolCall:
		without(&c.after, name)
	case events.HookOnTurnEnd:
		without(&c.end, name)
	case events.HookOnAbort:
		without(&c.abort, name)
	}
	return true
}

func without[In, Out any](p *point[In, Out], name string) {
	old := p.list.Load()
	if old == nil {
		return
	}
	list := slices.DeleteFunc(slices.Clone(*old), func(e *entry[In, Out]) bool { return e.info.Name == name })
	p.list.Store(&list)
}

func (c *Chain) seqOfLocked(name string) int64 {
	for _, i := range c.List() {
		if i.Name == name {
			return i.Seq
		}
	}
	return 0
}

// HasMessageSend reports whether on_message_send hooks are registered,
// so that a caller can spare building their input (a copy of the whole
// context) when none would read it.
func (c *Chain) HasMessageSend() bool {
	l := c.send.list.Load()
	return l != nil && len(*l) > 0
}

// HasTurnEnd reports whether on_turn_end hooks are registered (see
// HasMessageSend).
func (c *Chain) HasTurnEnd() bool {
	l := c.end.list.Load()
	return l != nil && len(*l) > 0
}

// HasBeforeToolCall reports whether before_tool_call hooks are
// registered (see HasMessageSend; whether one matches a given tool is
// not looked at).
func (c *Chain) HasBeforeToolCall() bool {
	l := c.before.list.Load()
	return l != nil && len(*l) > 0
}

// HasAfterToolCall reports whether after_tool_call hooks are registered
// (see HasBeforeToolCall).
func (c *Chain) HasAfterToolCall() bool {
	l := c.after.list.Load()
	return l != nil && len(*l) > 0
}

// List returns the registered hooks, by hook point (in the order a turn
// reaches them) and within one in the order they run.
func (c *Chain) List() []Info {
	var out []Info
	out = infos(out, &c.send)
	out = infos(out, &c.before)
	out = infos(out, &c.after)
	out = infos(out, &c.end)
	return infos(out, &c.abort)
}

func infos[In, Out any](out []Info, p *point[In, Out]) []Info {
	if l := p.list.Load(); l != nil {
		for _, e := range *l {
			out = append(out, e.info)
		}
	}
	return out
}

// spec describes how the generic runner treats one hook point.
type spec[In, Out any] struct {
	event events.HookEvent
	// goOn is the kind of the result that lets the chain go on.
	goOn events.HookResultKind
	// failKind is what fail_closed means here.
	failKind events.HookResultKind
	// all: run every hook whatever they answer (on_abort).
	all    bool
	turn   func(*In) *Turn
	clone  func(in *In, view *Turn) *In
	commit func(dst, src *In)
	match  func(*In, *regexp.Regexp) bool
	callID func(*In) string
	// result returns the kind of out ("" if invalid) and its reason.
	result func(Out) (events.HookResultKind, string)
	failed func(reason string) Out
}

// RunMessageSend runs the on_message_send hooks on in. On return
// in.Messages is the context as the hooks that answered left it.
func (c *Chain) RunMessageSend(ctx context.Context, in *MessageSendInput) Outcome[MessageSendResult] {
	return run(ctx, c, &c.send, &sendSpec, in)
}

// RunBeforeToolCall runs the before_tool_call hooks whose matcher fits
// in.Call.Name; in.Call is the call as they left it.
func (c *Chain) RunBeforeToolCall(ctx context.Context, in *ToolCallInput) Outcome[BeforeToolCallResult] {
	return run(ctx, c, &c.before, &beforeSpec, in)
}

// RunAfterToolCall runs the after_tool_call hooks whose matcher fits
// in.Call.Name; in.Result is the result as they left it.
func (c *Chain) RunAfterToolCall(ctx context.Context, in *ToolResultInput) Outcome[AfterToolCallResult] {
	return run(ctx, c, &c.after, &afterSpec, in)
}

// RunTurnEnd runs the on_turn_end hooks. The first hook that does not
// finish decides; its Messages are in the Outcome's Result.
func (c *Chain) RunTurnEnd(ctx context.Context, in *TurnEndInput) Outcome[TurnEndResult] {
	return run(ctx, c, &c.end, &endSpec, in)
}

// RunAbort runs every on_abort hook; failures are only reported. It
// detaches from ctx's cancellation (the turn is usually aborting because
// ctx was cancelled) but keeps each hook's timeout.
func (c *Chain) RunAbort(ctx context.Context, in *AbortInput) Outcome[AbortResult] {
	return run(context.WithoutCancel(ctx), c, &c.abort, &abortSpec, in)
}

func (c *Chain) timeout(o time.Duration) time.Duration {
	if o == 0 {
		o = c.Timeout
	}
	if o == 0 {
		o = DefaultTimeout
	}
	return o
}

func run[In, Out any](ctx context.Context, c *Chain, p *point[In, Out], s *spec[In, Out], in *In) Outcome[Out] {
	out := Outcome[Out]{Kind: s.goOn}
	l := p.list.Load()
	if l == nil {
		return out
	}
	turn := s.turn(in)
	var obs Observer
	if turn != nil {
		obs = turn.Observer
	}
	callID := s.callID(in)
	for _, e := range *l {
		if e.re != nil && !s.match(in, e.re) {
			continue
		}
		if err := ctx.Err(); err != nil {
			// The caller gave up between two hooks: no hook decided.
			return failedOutcome(s, &Failure{Event: s.event, CallID: callID, Err: err}, "")
		}
		start := time.Now()
		res, kind, reason, err := call(ctx, c, e, s, in, turn)
		d := events.HookDecision{
			Hook: e.info.Name, Event: s.event, Result: kind, Reason: reason,
			MS: float64(time.Since(start).Microseconds()) / 1000, CallID: callID,
		}
		if err != nil {
			f := &Failure{Hook: e.info.Name, Event: s.event, CallID: callID, Err: err}
			d.Failed, d.Reason = true, f.Error()
			canceled := ctx.Err() != nil
			if s.all {
				d.Result = s.goOn
				report(obs, d)
				if !out.Failed {
					out.Failed, out.Err = true, f
				} else {
					out.Err = errors.Join(out.Err, f)
				}
				continue
			}
			if e.info.Failure == events.FailOpen && !canceled {
				d.Result = s.goOn
				report(obs, d)
				continue
			}
			d.Result = s.failKind
			report(obs, d)
			return failedOutcome(s, f, e.info.Name)
		}
		report(obs, d)
		if kind != s.goOn && !s.all {
			return Outcome[Out]{Result: res, Hook: e.info.Name, Kind: kind}
		}
	}
	return out
}

func failedOutcome[In, Out any](s *spec[In, Out], f *Failure, hook string) Outcome[Out] {
	return Outcome[Out]{Result: s.failed(f.Error()), Hook: hook, Kind: s.failKind, Failed: true, Err: f}
}

func report(o Observer, d events.HookDecision) {
	if o != nil {
		o.HookDecision(d)
	}
}

type callResult[Out any] struct {
	out Out
	err error
}

// call runs one hook on a private copy of the input in its own goroutine,
// so that a hook ignoring ctx can be abandoned at its timeout without
// racing with the hooks after it. The copy is committed to in only when
// the hook answered with a valid result.
func call[In, Out any](ctx context.Context, c *Chain, e *entry[In, Out], s *spec[In, Out], in *In, turn *Turn) (res Out, kind events.HookResultKind, reason string, err error) {
	hctx, cancel := ctx, context.CancelFunc(func() {})
	if t := c.timeout(e.info.Timeout); t > 0 {
		hctx, cancel = context.WithTimeout(ctx, t)
	}
	defer cancel()
	hctx, span := startSpan(hctx, s.event, e.info.Name, turn, s.callID(in))
	began := time.Now()
	defer func() { endSpan(ctx, span, s.event, e.info.Name, began, kind, err) }()

	view := turn.view(e.info.Name, s.event)
	w := s.clone(in, view)
	done := make(chan callResult[Out], 1) // buffered: an abandoned hook can still finish
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- callResult[Out]{err: fmt.Errorf("%w: %v", ErrPanic, r)}
			}
		}()
		o, err := e.h.Call(hctx, w)
		done <- callResult[Out]{out: o, err: err}
	}()

	var r callResult[Out]
	select {
	case r = <-done:
	case <-hctx.Done():
		// Prefer an answer that raced with the deadline.
		select {
		case r = <-done:
		default:
			r.err = hctx.Err()
		}
	}
	view.end()
	if r.err != nil {
		if ctx.Err() == nil && errors.Is(r.err, context.DeadlineExceeded) && hctx.Err() != nil {
			r.err = fmt.Errorf("%w after %v", ErrTimeout, c.timeout(e.info.Timeout))
		}
		return res, "", "", r.err
	}
	kind, reason = s.result(r.out)
	if kind == "" {
		return res, "", "", fmt.Errorf("%w: %+v", ErrInvalidResult, r.out)
	}
	s.commit(in, w)
	turn.commitVars(view.Vars)
	return r.out, kind, reason, nil
}
