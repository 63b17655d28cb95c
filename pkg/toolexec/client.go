package toolexec

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/llmworker/llmworker/internal/leaf/jsread"
	"github.com/llmworker/llmworker/pkg/cenats"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/fence"
	"github.com/llmworker/llmworker/pkg/telemetry"
	"github.com/llmworker/llmworker/pkg/tool"
)

// Defaults of ClientOptions.
const (
	// DefaultToolTimeout is the deadline of a call whose context has none
	// and whose tool declares no timeout.
	DefaultToolTimeout = 5 * time.Minute
	// DefaultResultGrace is how long after the call's deadline the client
	// still waits for the result (the executor reports a timeout itself at
	// the deadline; this covers transport).
	DefaultResultGrace = 5 * time.Second
	// DefaultRecheck is ClientOptions.Recheck's default.
	DefaultRecheck = 3 * time.Second
)

// ClientOptions configures a Client. The zero value works.
type ClientOptions struct {
	// Prefix is the subject prefix P.
	Prefix string
	// Source is the CloudEvents source of calls ("" = /llmw/turn/<random>).
	Source string
	// DefaultTimeout is used when neither ctx nor the tool has a deadline.
	DefaultTimeout time.Duration
	// ResultGrace is added to the deadline while waiting for a result.
	ResultGrace time.Duration
	// Recheck is how often a call waiting for its result also looks for
	// it in LLMW_TOOLRESULTS (0 = DefaultRecheck; negative = never): the
	// result also comes as a core NATS message, which a connection cut
	// off from its server (a partitioned node) does not get.
	Recheck time.Duration
	// Logger receives the client's warnings: a stored result that cannot
	// be read (nil = discarded).
	Logger *slog.Logger
}

// Client sends tool calls to toolexec over JetStream (docs/protocol.md, "Tools")
// and waits for their results. It is safe for concurrent use.
type Client struct {
	nc       *nats.Conn
	js       jetstream.JetStream
	subjects events.Subjects
	o        ClientOptions

	mu      sync.Mutex
	results jetstream.Stream
}

// NewClient returns a Client on nc. js must be a JetStream context of nc:
// a call's result subscription is then registered at the server before
// the call is published, so that a quick result cannot pass it by (on
// another connection it can, and the call finds its result only at the
// next Recheck).
func NewClient(nc *nats.Conn, js jetstream.JetStream, o ClientOptions) *Client {
	if o.Source == "" {
		o.Source = events.Source("turn", nuid.Next())
	}
	if o.DefaultTimeout <= 0 {
		o.DefaultTimeout = DefaultToolTimeout
	}
	if o.ResultGrace <= 0 {
		o.ResultGrace = DefaultResultGrace
	}
	if o.Recheck == 0 {
		o.Recheck = DefaultRecheck
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Client{nc: nc, js: js, subjects: events.NewSubjects(o.Prefix), o: o}
}

func (c *Client) resultsStream(ctx context.Context) (jetstream.Stream, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.results != nil {
		return c.results, nil
	}
	st, err := c.js.Stream(ctx, events.StreamToolResults)
	if err != nil {
		return nil, fmt.Errorf("toolexec: stream %s: %w", events.StreamToolResults, err)
	}
	c.results = st
	return st, nil
}

// republished says whether LLMW_TOOLRESULTS republishes each result it
// stores on P.tool.stored.<turn_id>.<call_id> (provision configures it; a
// stream made by hand, or by a version before, may not), as the stream's
// configuration said when this client first read it. A message there is
// the call's result of record: the stream republishes a result only once
// it stored it, and neither a duplicate nor a result it failed to store.
func (c *Client) republished(ctx context.Context) bool {
	st, err := c.resultsStream(ctx)
	if err != nil {
		return false
	}
	rp := st.CachedInfo().Config.RePublish
	return rp != nil && !rp.HeadersOnly && rp.Source == c.subjects.ToolResultAll() && rp.Destination == c.subjects.ToolStoredAll()
}

// StoredResult returns the result of a call already stored in
// LLMW_TOOLRESULTS, as the stream's leader has it; ok is false when there
// is none yet. A replica that is behind (a node back from a partition)
// may not have a result the leader stored, and a call believed
// unanswered runs again. A stored result that cannot be read (see
// Unreadable) is returned as the error result Unreadable makes of it:
// it is the call's result of record all the same.
func (c *Client) StoredResult(ctx context.Context, turnID, callID string) (events.ToolCallResult, bool, error) {
	return c.storedResult(ctx, turnID, callID, "", true)
}

// storedResult is StoredResult, read from the stream's leader or, with
// leader false, with a direct get that any replica answers: for the waits
// for a result to appear, where a replica that is behind only makes them
// look again (a call's result is stored once; a replica that has it has
// the one of record).
func (c *Client) storedResult(ctx context.Context, turnID, callID, name string, leader bool) (events.ToolCallResult, bool, error) {
	var m *jetstream.RawStreamMsg
	var err error
	if leader {
		m, err = jsread.LastMsg(ctx, c.nc, jsread.APIPrefix(c.js), events.StreamToolResults, c.subjects.ToolResult(turnID, callID))
	} else {
		var st jetstream.Stream
		if st, err = c.resultsStream(ctx); err != nil {
			return events.ToolCallResult{}, false, err
		}
		m, err = st.GetLastMsgForSubject(ctx, c.subjects.ToolResult(turnID, callID))
	}
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return events.ToolCallResult{}, false, nil
	}
	if err != nil {
		return events.ToolCallResult{}, false, fmt.Errorf("toolexec: stored result of call %s: %w", callID, err)
	}
	return c.readResult(m.Header, m.Data, turnID, callID, name), true, nil
}

// readResult is the result of call callID of turn turnID that a message
// of its result subject holds, or for one that cannot be read the error
// result Unreadable makes of it, logged: the stream stored it as the
// call's result, and refuses any later one as a duplicate, so waiting for
// another would only end at the deadline. name is the tool's ("" when the
// caller does not know it).
func (c *Client) readResult(h nats.Header, data []byte, turnID, callID, name string) events.ToolCallResult {
	r, err := ReadResult(h, data, turnID, callID)
	if err == nil {
		return r
	}
	if name == "" {
		name = r.Name
	}
	c.o.Logger.Warn("toolexec: a tool result that cannot be read is the call's result; the model is told so",
		"turn_id", turnID, "call_id", callID, "tool", name, "err", err)
	return Unreadable(turnID, callID, name, err)
}

// ReadResult decodes a result message of call callID of turn turnID,
// taken from its subject P.tool.result.<turn_id>.<call_id> (or the
// stream's republished copy): DecodeResult, and then a result that names
// another call or turn than its subject is an error too (wrapping
// ErrUnreadableResult). On an error the result holds what could be read.
func ReadResult(h nats.Header, data []byte, turnID, callID string) (events.ToolCallResult, error) {
	r, err := DecodeResult(h, data)
	switch {
	case err != nil:
		return r, fmt.Errorf("%w: %w", ErrUnreadableResult, err)
	case r.CallID != callID:
		return r, fmt.Errorf("%w: field \"call_id\" is %q, but the result was published for call %q", ErrUnreadableResult, r.CallID, callID)
	case r.TurnID != "" && r.TurnID != turnID:
		return r, fmt.Errorf("%w: field \"turn_id\" is %q, but the result was published for turn %q", ErrUnreadableResult, r.TurnID, turnID)
	}
	return r, nil
}

// Unreadable is the error result that stands for a stored result of a
// call that cannot be read (ReadResult's err): the model reads what was
// wrong with it, and that the tool may have run.
func Unreadable(turnID, callID, name string, err error) events.ToolCallResult {
	why := err.Error()
	for _, p := range []string{ErrUnreadableResult.Error() + ": ", "toolexec: tool result: "} {
		why = strings.TrimPrefix(why, p)
	}
	tool := "the tool"
	if name != "" {
		tool = fmt.Sprintf("tool %q", name)
	}
	return events.ToolCallResult{CallID: callID, TurnID: turnID, Name: name, IsError: true,
		Content: fmt.Sprintf("the result of %s cannot be read: %s. Its host published a malformed result, which is the call's only result: the tool may have run.", tool, why)}
}

// storedWait bounds how long Call waits for a result it received to
// appear in LLMW_TOOLRESULTS.
const storedWait = 5 * time.Second

// storedPoll is awaitStored's first pause: the result's message reaches
// the caller while the stream is still storing it (about one disk write),
// so a lookup that comes too early finds it a fraction of a millisecond
// later, not several.
const storedPoll = 200 * time.Microsecond

// awaitStored polls the stored result of req's call until it appears,
// storedWait passes or ctx ends.
func (c *Client) awaitStored(ctx context.Context, req events.ToolCallRequest) (events.ToolCallResult, bool) {
	deadline := time.Now().Add(storedWait)
	backoff := storedPoll
	for {
		actx, cancel := context.WithTimeout(ctx, time.Second)
		r, ok, err := c.storedResult(actx, req.TurnID, req.CallID, req.Name, false)
		cancel()
		if err == nil && ok {
			return r, true
		}
		if ctx.Err() != nil || time.Now().Add(backoff).After(deadline) {
			return events.ToolCallResult{}, false
		}
		time.Sleep(backoff)
		backoff = min(2*backoff, 100*time.Millisecond)
	}
}

// DecodeResult decodes a llmw.tool.result message (binary or
// structured CloudEvent).
func DecodeResult(h nats.Header, data []byte) (events.ToolCallResult, error) {
	env, err := events.DecodeEnvelope(h, data)
	if err != nil {
		return events.ToolCallResult{}, fmt.Errorf("toolexec: tool result: %w", err)
	}
	if env.Type != events.TypeToolResult {
		return events.ToolCallResult{}, fmt.Errorf("toolexec: tool result: %w: type %q, want %q", events.ErrInvalid, env.Type, events.TypeToolResult)
	}
	r, err := events.DecodeData[events.ToolCallResult](env)
	if err != nil {
		return events.ToolCallResult{}, fmt.Errorf("toolexec: tool result: %w", err)
	}
	return r, nil
}

// Call runs a tool call through toolexec and returns its result (which may
// be an error result: IsError). In order, so that no result is missed and
// no finished call runs again (docs/architecture.md, "Durability"): subscribe to the result
// subject; look for the stored result in LLMW_TOOLRESULTS (not for a call
// published for the first time, req.FirstPublish) and, at the same
// time, pass ctx's fence (pkg/fence); return the stored result if there is
// one, else the fence's error if it failed (nothing is published); publish the
// call with Nats-Msg-Id = <turn id>.<call id>, wait for the result and
// return it as LLMW_TOOLRESULTS stored it. An empty req.Deadline is set from
// ctx, then timeout, then the default. Cancelling ctx publishes
// P.tool.cancel.<turn_id>.<call_id> once ctx's fence passed and returns
// ctx's error; no result by the deadline (plus grace) is ErrToolDeadline
// (and cancels the call too).
func (c *Client) Call(ctx context.Context, req events.ToolCallRequest, timeout time.Duration) (events.ToolCallResult, error) {
	if len(req.Input) == 0 {
		req.Input = json.RawMessage(`{}`)
	}
	if err := req.Validate(); err != nil {
		return events.ToolCallResult{}, fmt.Errorf("%w: %w", ErrInvalidCall, err)
	}
	if !events.ValidToolName(req.Name) {
		return events.ToolCallResult{}, fmt.Errorf("%w: tool name %q", ErrInvalidCall, req.Name)
	}
	if req.Deadline.IsZero() {
		if d, ok := ctx.Deadline(); ok {
			req.Deadline = d
		} else {
			if timeout <= 0 {
				timeout = c.o.DefaultTimeout
			}
			req.Deadline = time.Now().Add(timeout)
		}
	}
	// Where LLMW_TOOLRESULTS republishes what it stores, the result comes
	// from there and is the one of record as it arrives; otherwise it
	// comes as the host published it, and is read back (awaitStored).
	republished := c.republished(ctx)
	resSubj := c.subjects.ToolResult(req.TurnID, req.CallID)
	if republished {
		resSubj = c.subjects.ToolStored(req.TurnID, req.CallID)
	}
	ch := make(chan *nats.Msg, 4)
	sub, err := c.nc.ChanSubscribe(resSubj, ch)
	if err != nil {
		return events.ToolCallResult{}, fmt.Errorf("toolexec: subscribe %s: %w", resSubj, err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	// The host's progress reports of the call go to ctx's listener (the
	// worker's: llmw.tool.progress events).
	if report := tool.ProgressFrom(ctx); report != nil {
		psub, err := c.nc.Subscribe(c.subjects.ToolProgress(req.TurnID, req.CallID), func(m *nats.Msg) {
			env, err := events.DecodeEnvelope(m.Header, m.Data)
			if err != nil || env.Type != events.TypeToolProgress {
				return
			}
			if p, err := events.DecodeData[events.ToolProgress](env); err == nil && p.CallID == req.CallID {
				report(tool.Progress{Progress: p.Progress, Total: p.Total, Message: p.Message})
			}
		})
		if err == nil {
			// Drain: reports that came before the result still reach the
			// listener, which drops what comes after the call's end.
			defer func() { _ = psub.Drain() }()
		}
	}

	// ctx's fence (a flush of the turn's events, pkg/fence) and the
	// stored-result check are independent waits: they run together, and
	// the call is published only after both. A call published for the
	// first time has no stored result to find.
	var stored events.ToolCallResult
	var ok bool
	var fenceErr error
	if req.FirstPublish {
		fenceErr = fence.Check(ctx)
	} else {
		fenced := make(chan error, 1)
		go func() { fenced <- fence.Check(ctx) }()
		// JetStream errors here are usually transient (a stream electing
		// a new leader after a node loss): retry until the call's
		// deadline rather than hand the model an error about our plumbing.
		err = retryUntil(ctx, req.Deadline, func(actx context.Context) error {
			var err error
			stored, ok, err = c.storedResult(actx, req.TurnID, req.CallID, req.Name, true)
			return err
		})
		fenceErr = <-fenced
	}
	if err != nil {
		return events.ToolCallResult{}, err
	} else if ok {
		return stored, nil
	}
	// A replica that lost the turn must not publish the call
	// (docs/architecture.md#fencing).
	if fenceErr != nil {
		return events.ToolCallResult{}, fmt.Errorf("toolexec: call %s of tool %s not published: %w", req.CallID, req.Name, fenceErr)
	}
	env, err := events.NewEnvelope(c.o.Source, events.TypeToolCall, req)
	if err != nil {
		return events.ToolCallResult{}, err
	}
	env.Subject, env.TurnID, env.SessionID = req.TurnID, req.TurnID, req.SessionID
	telemetry.Inject(ctx, env)
	msg := cenats.NewMsg(c.subjects.ToolCall(req.Name), env)
	// A re-published call (a resumed turn) is dropped by the stream's
	// duplicate window; the result of the first one still arrives.
	// Publishing again is safe: the stream drops a duplicate msg id.
	if err := retryUntil(ctx, req.Deadline, func(actx context.Context) error {
		_, err := c.js.PublishMsg(actx, msg, jetstream.WithMsgID(events.ToolMsgID(req.TurnID, req.CallID)))
		return err
	}); err != nil {
		if ctx.Err() != nil {
			// The call may be stored (and running) although its ack did
			// not arrive before the cancel: cancel it too.
			c.cancelFenced(ctx, req)
			return events.ToolCallResult{}, ctx.Err()
		}
		return events.ToolCallResult{}, fmt.Errorf("toolexec: publish call %s of tool %s: %w", req.CallID, req.Name, err)
	}

	wait := time.NewTimer(time.Until(req.Deadline) + c.o.ResultGrace)
	defer wait.Stop()
	var recheck <-chan time.Time
	if c.o.Recheck > 0 {
		t := time.NewTicker(c.o.Recheck)
		defer t.Stop()
		recheck = t.C
	}
	for {
		select {
		case <-recheck:
			// The stored result is the one of record; its message may
			// have been lost to this connection (a partition, a
			// reconnect while it was routed).
			actx, cancel := context.WithTimeout(ctx, time.Second)
			stored, ok, err := c.storedResult(actx, req.TurnID, req.CallID, req.Name, false)
			cancel()
			if err == nil && ok {
				return stored, nil
			}
		case m := <-ch:
			// The subject is the call's: what comes there is its result,
			// readable or not.
			if republished {
				return c.readResult(m.Header, m.Data, req.TurnID, req.CallID, req.Name), nil
			}
			// The message comes as the server routes it, which may be
			// before the stream stored it, or without it storing it (a
			// duplicate of a stored result, a failed store): the stored
			// result is the one of record, the one a resumed turn finds.
			if stored, ok := c.awaitStored(ctx, req); ok {
				return stored, nil
			}
			// Not stored: the executor gives the call back and runs it
			// again; its next result comes on the same subject.
		case <-ctx.Done():
			c.cancelFenced(ctx, req)
			return events.ToolCallResult{}, ctx.Err()
		case <-wait.C:
			c.Cancel(req.TurnID, req.CallID)
			return events.ToolCallResult{}, fmt.Errorf("%w: call %s of tool %q got no result by %s; is a toolexec hosting %q running?",
				ErrToolDeadline, req.CallID, req.Name, req.Deadline.Format(time.RFC3339), req.Name)
		}
	}
}

// Cancel publishes P.tool.cancel.<turn_id>.<call_id> (best effort, core
// NATS): the host running that turn's call stops it. The turn id is part
// of the subject because call ids repeat across turns (events.ToolMsgID).
func (c *Client) Cancel(turnID, callID string) {
	env, err := events.NewEnvelope(c.o.Source, TypeToolCancel, map[string]string{"turn_id": turnID, "call_id": callID})
	if err != nil {
		return
	}
	env.Subject, env.TurnID = turnID, turnID
	_ = c.nc.PublishMsg(cenats.NewMsg(c.subjects.ToolCancel(turnID, callID), env))
}

// cancelFenced cancels the call of a Call whose ctx ended, once ctx's
// fence passed: a turn replica that lost the turn (its run is cancelled
// because its events were refused) must not stop a call that the replica
// continuing the turn publishes again and waits for; the stored result
// would be the cancel's.
func (c *Client) cancelFenced(ctx context.Context, req events.ToolCallRequest) {
	if fence.Check(context.WithoutCancel(ctx)) != nil {
		return
	}
	c.Cancel(req.TurnID, req.CallID)
}

// TypeToolCancel is the CloudEvent type published on
// P.tool.cancel.<turn_id>.<call_id>; hosts read the ids from the subject.
const TypeToolCancel = "llmw.tool.cancel"

// Tool returns a tool.Tool for a tool hosted by toolexec.
func (c *Client) Tool(e events.ToolCatalogEntry) *RemoteTool {
	return &RemoteTool{c: c, entry: e}
}

// RemoteTool is a tool.Tool whose Execute runs the call on a toolexec
// replica (Client.Call). The context must carry the call (WithCall).
type RemoteTool struct {
	c     *Client
	entry events.ToolCatalogEntry
}

var (
	_ tool.Tool      = (*RemoteTool)(nil)
	_ tool.Timeouter = (*RemoteTool)(nil)
	_ tool.Versioner = (*RemoteTool)(nil)
	_ tool.Eagerer   = (*RemoteTool)(nil)

	_ tool.CallCanceller = (*RemoteTool)(nil)

	_ tool.ContentTool = (*RemoteTool)(nil)
)

func (t *RemoteTool) Name() string                 { return t.entry.Name }
func (t *RemoteTool) Description() string          { return t.entry.Description }
func (t *RemoteTool) InputSchema() json.RawMessage { return t.entry.InputSchema }

// Timeout is the catalog's timeout_ms.
func (t *RemoteTool) Timeout() time.Duration {
	return time.Duration(t.entry.TimeoutMS) * time.Millisecond
}

// Version is the catalog's version.
func (t *RemoteTool) Version() string { return t.entry.Version }

// Eager is the catalog's eager: a call may start while the model still
// streams.
func (t *RemoteTool) Eager() bool { return t.entry.Eager }

// CancelCall implements tool.CallCanceller: it publishes
// P.tool.cancel.<turn_id>.<call_id> once ctx's fence passed (pkg/fence:
// a replica that lost the turn stops no call that the replica owning it
// may be waiting for).
func (t *RemoteTool) CancelCall(ctx context.Context, c tool.CallInfo) error {
	if err := fence.Check(ctx); err != nil {
		return fmt.Errorf("toolexec: call %s of tool %s not cancelled: %w", c.CallID, t.entry.Name, err)
	}
	t.c.Cancel(c.TurnID, c.CallID)
	return nil
}

// Entry is the catalog entry the tool was built from.
func (t *RemoteTool) Entry() events.ToolCatalogEntry { return t.entry }

// Execute runs the call identified by tool.CallFrom(ctx). An error result comes
// back as a *ResultError (matching ErrToolFailed) whose text is the
// result's content.
func (t *RemoteTool) Execute(ctx context.Context, input json.RawMessage) (string, error) {
	text, _, err := t.ExecuteContent(ctx, input)
	return text, err
}

// ExecuteContent implements tool.ContentTool: Execute with the result's
// parts (images and files the tool returned; nil for a text result).
func (t *RemoteTool) ExecuteContent(ctx context.Context, input json.RawMessage) (string, tool.Content, error) {
	ci, ok := tool.CallFrom(ctx)
	if !ok {
		return "", nil, ErrNoCallInfo
	}
	if len(input) > 0 && !json.Valid(input) {
		// The model's streamed input did not parse: tell it, like a local
		// typed tool would, instead of failing the call.
		return "", nil, &tool.InvalidArgumentError{Tool: t.entry.Name, Problems: []tool.Problem{{Message: "is not valid JSON; send a JSON object"}}}
	}
	r, err := t.c.Call(ctx, events.ToolCallRequest{
		CallID: ci.CallID, TurnID: ci.TurnID, SessionID: ci.SessionID, Name: t.entry.Name, Input: input,
		FirstPublish: ci.First,
	}, t.Timeout())
	if err != nil {
		return "", nil, err
	}
	if r.IsError {
		return "", nil, &ResultError{Result: r}
	}
	return r.Content, r.Parts, nil
}

// Bounds of retryUntil.
const (
	retryAttemptTimeout = 5 * time.Second
	retryMaxBackoff     = 2 * time.Second
)

// retryUntil runs op until it succeeds, ctx ends or the next attempt would
// start after deadline; each attempt gets at most retryAttemptTimeout. It
// returns op's last error (or ctx's).
func retryUntil(ctx context.Context, deadline time.Time, op func(context.Context) error) error {
	backoff := 50 * time.Millisecond
	for {
		now := time.Now()
		d := now.Add(retryAttemptTimeout)
		if d.After(deadline) && deadline.After(now) {
			d = deadline
		}
		actx, cancel := context.WithDeadline(ctx, d)
		err := op(actx)
		cancel()
		if err == nil || ctx.Err() != nil {
			if err != nil {
				return ctx.Err()
			}
			return nil
		}
		if time.Now().Add(backoff).After(deadline) {
			return err
		}
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
		backoff = min(backoff*2, retryMaxBackoff)
	}
}
