package llm

import (
	"crypto/rand"
	"encoding/hex"

	"github.com/llmworker/llmworker/pkg/events"
)

// normalizer is the pure state machine of Normalize: events in, well-formed
// events out (queued in q). It does no I/O, so it is tested and fuzzed
// without goroutines.
type normalizer struct {
	q  []events.Event
	qi int

	started  bool
	done     bool
	sawError bool

	open    []nblock     // open blocks in start order
	used    indexSet     // output indexes used so far
	nextOut int          // lowest output index that may be free
	dropped map[int]bool // source indexes of nameless tool blocks being dropped
	ids     idSet        // tool_use ids given out so far

	// model, responseID and stopReason of the source's completed status,
	// kept on ours.
	model, responseID string
	stopReason        events.StopReason
}

type nblock struct {
	src, out int
	typ      events.BlockType
}

func (n *normalizer) emit(ev events.Event) { n.q = append(n.q, ev) }

// pop returns the next queued output event.
func (n *normalizer) pop() (events.Event, bool) {
	if n.qi < len(n.q) {
		ev := n.q[n.qi]
		n.q[n.qi] = nil
		n.qi++
		if n.qi == len(n.q) {
			n.q, n.qi = n.q[:0], 0
		}
		return ev, true
	}
	return nil, false
}

// Boxed once: emitting a status boxes no new value per stream.
var (
	statusStarted   events.Event = events.StatusEvent{Status: events.StatusStarted}
	statusCompleted events.Event = events.StatusEvent{Status: events.StatusCompleted}
)

func (n *normalizer) ensureStarted() {
	if !n.started {
		n.started = true
		n.emit(statusStarted)
	}
}

// feed takes one source event.
func (n *normalizer) feed(ev events.Event) {
	if n.done {
		return
	}
	n.ensureStarted()
	switch e := ev.(type) {
	case events.BlockDelta:
		n.delta(ev, e)
	case events.PingEvent, events.UsageEvent:
		n.emit(ev) // as received: boxing e again would allocate
	case events.ErrorEvent:
		if e.Message == "" {
			e.Message = "provider error"
			if e.Code != "" {
				e.Message += " " + e.Code
			}
		}
		n.sawError = true
		n.emit(e)
	case events.StatusEvent:
		switch e.Status {
		case events.StatusCompleted:
			n.model, n.responseID, n.stopReason = e.Model, e.ResponseID, e.StopReason
			if !n.stopReason.Valid() {
				n.stopReason = ""
			}
			n.terminateWith(ev, e.Status, nil, "")
		case events.StatusCancelled:
			n.terminate(e.Status, nil, "cancelled by the provider")
		case events.StatusFailed:
			var ee *events.ErrorEvent
			if !n.sawError {
				ee = &events.ErrorEvent{Code: CodeProviderFailed, Message: "the provider reported a failure without saying why"}
			}
			n.terminate(events.StatusFailed, ee, "provider failed")
		}
		// started again, or an unknown status: dropped.
	case events.BlockStart:
		n.start(ev, e)
	case events.BlockStop:
		if n.dropped[e.Index] {
			delete(n.dropped, e.Index)
			return
		}
		if i := n.find(e.Index); i >= 0 {
			reason := e.StopReason
			if !reason.Valid() {
				reason = ""
			}
			stop := ev
			if reason != e.StopReason {
				stop = events.BlockStop{StopReason: reason, Signature: e.Signature}
			}
			n.close(i, stop, "")
		}
	case events.BlockAbort:
		if n.dropped[e.Index] {
			delete(n.dropped, e.Index)
			return
		}
		if i := n.find(e.Index); i >= 0 {
			why := e.Reason
			if why == "" {
				why = "aborted by the provider"
			}
			n.close(i, nil, why)
		}
	}
}

// terminate ends the stream: an error event first when given, then every
// open block stopped (completed) or aborted (failed, cancelled) with reason
// why, then the status.
func (n *normalizer) terminate(st events.StreamStatus, ee *events.ErrorEvent, why string) {
	n.terminateWith(nil, st, ee, why)
}

// terminateWith is terminate for a source's status event src, emitted as
// received when nothing in it changes.
func (n *normalizer) terminateWith(src events.Event, st events.StreamStatus, ee *events.ErrorEvent, why string) {
	if n.done {
		return
	}
	n.ensureStarted()
	if ee != nil {
		if ee.Message == "" {
			ee.Message = "the provider stream failed"
		}
		n.sawError = true
		n.emit(*ee)
	}
	for len(n.open) > 0 {
		if st == events.StatusCompleted {
			n.close(0, events.BlockStop{}, "")
		} else {
			n.close(0, nil, why)
		}
	}
	ev := events.StatusEvent{Status: st}
	if st == events.StatusCompleted {
		ev.Model, ev.ResponseID, ev.StopReason = n.model, n.responseID, n.stopReason
	}
	switch s, ok := src.(events.StatusEvent); {
	case ok && s == ev:
		n.emit(src) // as received: boxing it again would allocate
	case ev == events.StatusEvent{Status: events.StatusCompleted}:
		n.emit(statusCompleted)
	default:
		n.emit(ev)
	}
	n.done = true
}

func (n *normalizer) find(src int) int {
	for i := range n.open {
		if n.open[i].src == src {
			return i
		}
	}
	return -1
}

// close ends n.open[i] with stop (when not nil, with its reason and
// signature) or else an abort with reason why.
func (n *normalizer) close(i int, stop events.Event, why string) {
	b := n.open[i]
	if s, ok := stop.(events.BlockStop); ok {
		if s.Index == b.out && s.BlockType == b.typ {
			n.emit(stop) // as received: boxing it again would allocate
		} else {
			s.Index, s.BlockType = b.out, b.typ
			n.emit(s)
		}
	} else {
		n.emit(events.BlockAbort{Index: b.out, BlockType: b.typ, Reason: why})
	}
	n.open = append(n.open[:i], n.open[i+1:]...)
}

// alloc returns a fresh output index: the source's when it was never used,
// else the lowest unused one.
func (n *normalizer) alloc(src int) int {
	if src >= 0 && !n.used.has(src) {
		n.used.add(src)
		return src
	}
	for n.used.has(n.nextOut) {
		n.nextOut++
	}
	n.used.add(n.nextOut)
	return n.nextOut
}

// indexSet is a set of block indexes. Sources number their blocks from 0,
// so the first 64 are bits, and a stream of a few blocks allocates no map
// (a map per model call was a cost the SDK alone does not have).
type indexSet struct {
	low  uint64
	high map[int]bool // the others
}

func (s *indexSet) has(i int) bool {
	if uint(i) < 64 {
		return s.low&(1<<uint(i)) != 0
	}
	return s.high[i]
}

func (s *indexSet) add(i int) {
	if uint(i) < 64 {
		s.low |= 1 << uint(i)
		return
	}
	if s.high == nil {
		s.high = make(map[int]bool)
	}
	s.high[i] = true
}

// idSet is a set of tool_use ids: the first few in an array searched in
// order (an answer makes a few calls), the others in a map.
type idSet struct {
	few  [4]string
	n    int
	more map[string]bool
}

func (s *idSet) has(id string) bool {
	for _, x := range s.few[:s.n] {
		if x == id {
			return true
		}
	}
	return s.more[id]
}

func (s *idSet) add(id string) {
	if s.n < len(s.few) {
		s.few[s.n] = id
		s.n++
		return
	}
	if s.more == nil {
		s.more = make(map[string]bool)
	}
	s.more[id] = true
}

// start takes e, which is ev unboxed.
func (n *normalizer) start(ev events.Event, e events.BlockStart) {
	if !e.BlockType.Valid() {
		return // its deltas, if any, start a block of their own kind
	}
	delete(n.dropped, e.Index)
	if i := n.find(e.Index); i >= 0 {
		// A new block on an open index means the old one is over.
		n.close(i, events.BlockStop{}, "")
	}
	if e.BlockType == events.BlockToolUse {
		e.ID = n.toolID(e.ID)
		if e.Name == "" {
			n.dropTool(e.Index, e.ID, e.Server)
			return
		}
	}
	out := n.push(e.Index, e.BlockType)
	if out == e.Index && (e.BlockType != events.BlockToolUse || e == ev.(events.BlockStart)) {
		n.emit(ev) // as received: boxing it again would allocate
		return
	}
	e.Index = out
	n.emit(e)
}

func (n *normalizer) push(src int, typ events.BlockType) int {
	out := n.alloc(src)
	n.open = append(n.open, nblock{src: src, out: out, typ: typ})
	return out
}

// dropTool reports a nameless tool_use block as started and aborted at
// once, and drops what the source sends for it until its stop or abort.
func (n *normalizer) dropTool(src int, id string, server bool) {
	out := n.alloc(src)
	n.emit(events.BlockStart{Index: out, BlockType: events.BlockToolUse, ID: id, Name: UnnamedTool, Server: server})
	n.emit(events.BlockAbort{Index: out, BlockType: events.BlockToolUse, Reason: "the provider sent a tool call without a tool name"})
	if n.dropped == nil {
		n.dropped = make(map[int]bool)
	}
	n.dropped[src] = true
}

// toolID returns id, or a new unique one when id is empty or taken.
func (n *normalizer) toolID(id string) string {
	for id == "" || n.ids.has(id) {
		id = newCallID()
	}
	n.ids.add(id)
	return id
}

func newCallID() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand, Go ≥ 1.24)
	return "call_" + hex.EncodeToString(b[:])
}

// delta takes d, which is ev unboxed.
func (n *normalizer) delta(ev events.Event, d events.BlockDelta) {
	if n.dropped[d.Index] {
		return
	}
	var typ events.BlockType
	switch d.Kind {
	case events.DeltaText:
		typ = events.BlockText
	case events.DeltaThinking:
		typ = events.BlockThinking
	case events.DeltaInputJSON:
		typ = events.BlockToolUse
	default:
		return
	}
	i := n.find(d.Index)
	if i < 0 {
		if typ == events.BlockToolUse {
			// Input without a start has no tool name: nothing could run it.
			n.dropTool(d.Index, n.toolID(""), false)
			return
		}
		out := n.push(d.Index, typ)
		n.emit(events.BlockStart{Index: out, BlockType: typ})
		i = len(n.open) - 1
	}
	b := n.open[i]
	if !deltaFits(d.Kind, b.typ) {
		return
	}
	if d.Index == b.out {
		// The usual case: passed on as received, without boxing a copy
		// (an allocation per delta).
		n.emit(ev)
		return
	}
	d.Index = b.out
	n.emit(d)
}

func deltaFits(k events.DeltaKind, t events.BlockType) bool {
	switch k {
	case events.DeltaText:
		return t == events.BlockText || t == events.BlockToolResult
	case events.DeltaThinking:
		return t == events.BlockThinking
	case events.DeltaInputJSON:
		return t == events.BlockToolUse
	}
	return false
}
