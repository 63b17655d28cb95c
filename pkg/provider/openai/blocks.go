package openai

import (
	"context"
	"errors"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
)

// Emitter is the bookkeeping both OpenAI adapters share to turn provider
// chunks into a well-formed §3 event sequence: the stream's llm.Pump,
// unique block indexes, and the open blocks in the order they were opened.
// It is not safe for concurrent use (a stream is read by one goroutine).
type Emitter struct {
	llm.Pump

	next   int
	open   []*Block
	blocks int // blocks ever opened
}

// Block is an open content block.
type Block struct {
	Index int
	Type  events.BlockType
}

// Open starts a block with a fresh index and queues its start.
func (e *Emitter) Open(start events.BlockStart) *Block {
	start.Index = e.next
	e.next++
	e.blocks++
	b := &Block{Index: start.Index, Type: start.BlockType}
	e.open = append(e.open, b)
	e.Emit(start)
	return b
}

// Opened reports how many blocks were opened so far.
func (e *Emitter) Opened() int { return e.blocks }

// HasOpen reports whether any block is open.
func (e *Emitter) HasOpen() bool { return len(e.open) > 0 }

// Stop queues the stop of b (if it is still open).
func (e *Emitter) Stop(b *Block, reason events.StopReason, signature string) {
	if b == nil || !e.remove(b) {
		return
	}
	e.Emit(events.BlockStop{Index: b.Index, BlockType: b.Type, StopReason: reason, Signature: signature})
}

// StopAll stops every open block, in index order, with reason.
func (e *Emitter) StopAll(reason events.StopReason) {
	for _, b := range e.open {
		e.Emit(events.BlockStop{Index: b.Index, BlockType: b.Type, StopReason: reason})
	}
	e.open = e.open[:0]
}

// AbortAll aborts every open block with reason.
func (e *Emitter) AbortAll(reason string) {
	for _, b := range e.open {
		e.Emit(events.BlockAbort{Index: b.Index, BlockType: b.Type, Reason: reason})
	}
	e.open = e.open[:0]
}

func (e *Emitter) remove(b *Block) bool {
	for i, o := range e.open {
		if o == b {
			e.open = append(e.open[:i], e.open[i+1:]...)
			return true
		}
	}
	return false
}

// Fail ends the stream as failed: open blocks are aborted, then the error
// event and status failed are queued. An error that says the context
// did not fit the model's window (context_length_exceeded in a
// Responses stream's response.failed, a compatible server's message) is
// code context_overflow (llm.IsContextOverflow).
func (e *Emitter) Fail(ev events.ErrorEvent) {
	if llm.IsContextOverflow(ev.Code, ev.Message) {
		ev.Code = llm.CodeContextOverflow
	}
	e.AbortAll(ev.Code)
	e.Emit(ev, events.StatusEvent{Status: events.StatusFailed})
}

// EndCtx ends the stream after a context error: cancelled for a
// cancellation, failed (code "timeout") for a deadline.
func (e *Emitter) EndCtx(err error) {
	if errors.Is(err, context.DeadlineExceeded) {
		e.Fail(events.ErrorEvent{Code: "timeout", Message: err.Error()})
		return
	}
	e.AbortAll("cancelled")
	e.Emit(events.StatusEvent{Status: events.StatusCancelled})
}

// First returns the open block with the lowest index (nil if none).
func (e *Emitter) First() *Block {
	if len(e.open) == 0 {
		return nil
	}
	return e.open[0]
}
