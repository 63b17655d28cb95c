package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/media"
	"github.com/llmworker/llmworker/pkg/turn"
)

// Gateway serves the AI SDK UI message stream protocol over HTTP for the
// turns of an llmworker installation, and the web UI. It keeps no state
// of its own: what a session's turn is, and every part of a stream, comes
// from LLMW_EVENTS, so any replica answers any request.
type Gateway struct {
	cfg    Config
	js     jetstream.JetStream
	events jetstream.Stream
	tc     *turn.Client
	subj   events.Subjects
	mux    *http.ServeMux

	media media.Lazy // LLMW_MEDIA, opened by the first attachment that needs it

	mu      sync.Mutex // closed and streams.Add
	closed  bool
	done    chan struct{}
	streams sync.WaitGroup
}

var _ http.Handler = (*Gateway)(nil)

// New returns a gateway on nc. LLMW_EVENTS and LLMW_TURNS must exist
// (llmworker provision, or any service's start).
func New(ctx context.Context, nc *nats.Conn, cfg Config) (*Gateway, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("gateway: jetstream: %w", err)
	}
	st, err := js.Stream(ctx, events.StreamEvents)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, fmt.Errorf("%w: no stream %s (run llmworker provision, or start llmworker up)", turn.ErrNotProvisioned, events.StreamEvents)
	}
	if err != nil {
		return nil, fmt.Errorf("gateway: stream %s: %w", events.StreamEvents, err)
	}
	tc, err := turn.NewClient(nc, turn.ClientOptions{Prefix: cfg.Prefix, Source: events.Source("gateway", nuid.Next())})
	if err != nil {
		return nil, err
	}
	g := &Gateway{cfg: cfg, js: js, events: st, tc: tc, subj: events.NewSubjects(cfg.Prefix), media: media.Lazy{JS: js}, done: make(chan struct{})}
	g.mux = http.NewServeMux()
	g.mux.HandleFunc("POST /api/chat", g.handleChat)
	g.mux.HandleFunc("GET /api/chat/{id}/stream", g.handleResume)
	g.mux.HandleFunc("GET /api/chat/{id}/messages", g.handleMessages)
	g.mux.HandleFunc("GET /api/chat/{id}/media/{ref}", g.handleMedia)
	g.mux.HandleFunc("POST /api/chat/{id}/stop", g.handleStop)
	g.mux.HandleFunc("POST /api/chat/{id}/compact", g.handleCompact)
	g.mux.HandleFunc("GET /api/sessions", g.handleSessions)
	g.mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, fmt.Errorf("%w: no endpoint %s %s (see docs/protocol.md, \"Gateway\")", ErrNotFound, r.Method, r.URL.Path))
	})
	g.mux.HandleFunc("GET /api/info", g.handleInfo)
	if !cfg.NoUI {
		ui := uiHandler()
		g.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodGet && r.Method != http.MethodHead {
				w.Header().Set("Allow", "GET, HEAD")
				writeError(w, fmt.Errorf("%w: %s %s: the UI is read with GET", ErrBadRequest, r.Method, r.URL.Path))
				return
			}
			ui.ServeHTTP(w, r)
		})
	}
	return g, nil
}

// ServeHTTP serves /api and the UI.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if o := r.Header.Get("Origin"); o != "" && strings.HasPrefix(r.URL.Path, "/api/") && g.allowOrigin(o) {
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", o)
		h.Add("Vary", "Origin")
		h.Set("Access-Control-Expose-Headers", HeaderStream)
		if r.Method == http.MethodOptions {
			// The preflight of a cross-origin fetch with JSON and a token.
			h.Set("Access-Control-Allow-Methods", "GET, POST")
			h.Set("Access-Control-Allow-Headers", "Content-Type, Authorization")
			h.Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
			return
		}
	}
	g.mux.ServeHTTP(w, r)
}

func (g *Gateway) allowOrigin(o string) bool {
	return slices.Contains(g.cfg.AllowOrigins, o) || slices.Contains(g.cfg.AllowOrigins, "*")
}

// Close ends every open stream (their turns go on; clients resume them)
// and waits for the handlers to return. Call it before http.Server's
// Shutdown, which waits for open streams.
func (g *Gateway) Close() {
	g.mu.Lock()
	if !g.closed {
		g.closed = true
		close(g.done)
	}
	g.mu.Unlock()
	g.streams.Wait()
}

func (g *Gateway) closing() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.closed
}

// open registers a stream; false once the gateway is closing.
func (g *Gateway) open() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.streams.Add(1)
	return true
}

// handleChat is POST /api/chat: a new user message starts a turn of the
// session; approval responses resume its paused turn. Either way the
// answer is the turn's UI message stream.
func (g *Gateway) handleChat(w http.ResponseWriter, r *http.Request) {
	if g.closing() {
		// Before submitting anything: the client retries elsewhere.
		w.Header().Set("Retry-After", "1")
		writeError(w, ErrShuttingDown)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, g.cfg.MaxBodyBytes)
	var req ChatRequest
	if err := decodeBody(r.Body, &req); err != nil {
		writeError(w, err)
		return
	}
	if err := req.validate(); err != nil {
		writeError(w, err)
		return
	}
	if err := g.authorize(r, req.ID, Write); err != nil {
		writeError(w, err)
		return
	}
	ctx := r.Context()
	latest, found, err := g.latestTurn(ctx, req.ID)
	if err != nil {
		writeError(w, err)
		return
	}
	if resp := req.approvals(); len(resp) > 0 {
		if found && latest.Last != events.TypeTurnPaused && latest.Active() && nested(resp) {
			g.resumeChildren(w, r, req.ID, latest, resp)
			return
		}
		if !found || latest.Last != events.TypeTurnPaused {
			status := "none"
			if found {
				status = latest.Status()
			}
			writeError(w, fmt.Errorf("%w: approval responses, but session %s has no paused turn (latest: %s)", ErrConflict, req.ID, status))
			return
		}
		paused, err := events.DecodeData[events.TurnPaused](latest.Env)
		if err != nil {
			writeError(w, err)
			return
		}
		ds, err := decisions(paused.Pending, resp, "")
		if err != nil {
			writeError(w, err)
			return
		}
		// Everything stored so far the client has: the stream continues
		// after it.
		last, _, err := g.lastOn(ctx, g.subj.Events(req.ID, latest.ID, "*"))
		if err != nil {
			writeError(w, err)
			return
		}
		rejected, stop, err := g.tc.Rejections(latest.ID)
		if err != nil {
			writeError(w, err)
			return
		}
		defer stop()
		if err := g.tc.Resume(ctx, &events.ResumeRequest{TurnID: latest.ID, Decisions: ds}); err != nil {
			writeError(w, err)
			return
		}
		g.stream(w, r, req.ID, latest.ID, last.Seq, rejected)
		return
	}
	content, err := req.userContent()
	if err != nil {
		writeError(w, err)
		return
	}
	if found && latest.Active() {
		writeError(w, fmt.Errorf("%w: session %s has a %s turn (%s): resume its stream (GET /api/chat/%s/stream), answer its approvals or stop it (POST /api/chat/%s/stop) first",
			ErrConflict, req.ID, latest.Status(), latest.ID, req.ID, req.ID))
		return
	}
	tr, err := g.turnRequest(&req, content)
	if err != nil {
		writeError(w, err)
		return
	}
	// Checked first, stored then: a refused request stores nothing.
	if err := g.offload(ctx, tr.Messages[0].Content); err != nil {
		writeError(w, err)
		return
	}
	rejected, stop, err := g.tc.Rejections(tr.TurnID)
	if err != nil {
		writeError(w, err)
		return
	}
	defer stop()
	if err := g.tc.Submit(ctx, tr); err != nil {
		writeError(w, err)
		return
	}
	g.cfg.Logger.Debug("gateway: turn submitted", "session_id", req.ID, "turn_id", tr.TurnID)
	g.stream(w, r, req.ID, tr.TurnID, 0, rejected)
}

// nested reports whether some approval response answers a call of a
// child turn (its toolCallId is "<child_turn_id>.<call_id>").
func nested(resp map[string]UIPart) bool {
	for id := range resp {
		if strings.Contains(id, ".") {
			return true
		}
	}
	return false
}

// resumeChildren answers approval responses to the calls of the paused
// child turns of the session's running turn root: each child turn with
// responses is resumed (a resume of the child's turn id), and the answer
// is root's stream from the first event after everything stored so far.
// Responses to calls of a child that is not paused are earlier pauses'
// and ignored; a child turn of another tree is refused.
func (g *Gateway) resumeChildren(w http.ResponseWriter, r *http.Request, session string, root turnInfo, resp map[string]UIPart) {
	ctx := r.Context()
	byTurn := map[string]map[string]UIPart{}
	for id, p := range resp {
		turnID, _, ok := strings.Cut(id, ".")
		if !ok {
			continue
		}
		if byTurn[turnID] == nil {
			byTurn[turnID] = map[string]UIPart{}
		}
		byTurn[turnID][id] = p
	}
	// Everything stored so far the client has: the tree waited for a
	// person when its stream ended.
	si, err := g.events.Info(ctx)
	if err != nil {
		writeError(w, fmt.Errorf("gateway: stream %s: %w", events.StreamEvents, err))
		return
	}
	after := si.State.LastSeq
	var resumes []*events.ResumeRequest
	for _, turnID := range slices.Sorted(maps.Keys(byTurn)) {
		if !events.ValidToken(turnID) {
			writeError(w, badf("approval of call %s.…: %q is not a turn id", turnID, turnID))
			return
		}
		latest, ok, err := g.lastOn(ctx, g.subj.Events("*", turnID, events.ChannelTurn))
		if err != nil {
			writeError(w, err)
			return
		}
		if !ok {
			writeError(w, fmt.Errorf("%w: approval responses for turn %s, which has no events", ErrNotFound, turnID))
			return
		}
		if err := g.inTree(ctx, turnID, latest.Session, root.ID); err != nil {
			writeError(w, err)
			return
		}
		if latest.Last != events.TypeTurnPaused {
			continue
		}
		paused, err := events.DecodeData[events.TurnPaused](latest.Env)
		if err != nil {
			writeError(w, err)
			return
		}
		ds, err := decisions(paused.Pending, byTurn[turnID], turnID+".")
		if err != nil {
			writeError(w, err)
			return
		}
		resumes = append(resumes, &events.ResumeRequest{TurnID: turnID, Decisions: ds})
	}
	if len(resumes) == 0 {
		writeError(w, fmt.Errorf("%w: approval responses, but no turn of session %s's turn %s is paused", ErrConflict, session, root.ID))
		return
	}
	rejected := make(chan events.TurnRejected, 1)
	done := make(chan struct{})
	var fan sync.WaitGroup
	defer func() {
		close(done)
		fan.Wait()
	}()
	for _, rq := range resumes {
		ch, stop, err := g.tc.Rejections(rq.TurnID)
		if err != nil {
			writeError(w, err)
			return
		}
		defer stop()
		fan.Add(1)
		go func() {
			defer fan.Done()
			select {
			case rj := <-ch:
				select {
				case rejected <- rj:
				default:
				}
			case <-done:
			}
		}()
	}
	for _, rq := range resumes {
		if err := g.tc.Resume(ctx, rq); err != nil {
			writeError(w, err)
			return
		}
	}
	g.stream(w, r, session, root.ID, after, rejected)
}

// inTree checks that turnID (of session token session) is a child turn
// in the tree of root: its llmw.turn.started names root as its root turn
// (or, naming none, as its parent).
func (g *Gateway) inTree(ctx context.Context, turnID, session, root string) error {
	m, err := g.events.GetMsg(ctx, 1, jetstream.WithGetMsgSubject(g.subj.Events(session, turnID, events.ChannelTurn)))
	if err != nil {
		return fmt.Errorf("gateway: first event of turn %s: %w", turnID, err)
	}
	env, err := events.DecodeEnvelope(m.Header, m.Data)
	if err != nil {
		return fmt.Errorf("gateway: first event of turn %s: %w", turnID, err)
	}
	if env.Type == events.TypeTurnStarted {
		st, err := events.DecodeData[events.TurnStarted](env)
		if err == nil && st.ParentTurnID != "" && (st.RootTurnID == root || st.RootTurnID == "" && st.ParentTurnID == root) {
			return nil
		}
	}
	return fmt.Errorf("%w: approval responses for turn %s, which is no sub-agent turn of turn %s", ErrForbidden, turnID, root)
}

// turnRequest builds the turn of a new user message from the config and
// what the request may narrow.
func (g *Gateway) turnRequest(req *ChatRequest, content []events.Part) (*events.TurnRequest, error) {
	model := g.cfg.Model
	if req.Model != "" {
		if !slices.Contains(g.cfg.Models, req.Model) {
			return nil, badf("model: %q is not offered here (one of %s)", req.Model, strings.Join(g.cfg.Models, ", "))
		}
		model = req.Model
	}
	tools := g.cfg.Tools
	if req.Tools != nil {
		any := slices.Contains(g.cfg.Tools, "*")
		for i, t := range req.Tools {
			if !events.ValidToolName(t) && t != "*" {
				return nil, badf("tools[%d]: %q is no tool name", i, t)
			}
			if !any && !slices.Contains(g.cfg.Tools, t) {
				return nil, badf("tools[%d]: %q is not offered here (%s)", i, t, strings.Join(g.cfg.Tools, ", "))
			}
		}
		tools = req.Tools
		if len(tools) == 0 {
			tools = []string{}
		}
	}
	steps := g.cfg.MaxSteps
	if req.MaxSteps > 0 {
		if steps > 0 && req.MaxSteps > steps {
			return nil, badf("maxSteps: at most %d here, got %d", steps, req.MaxSteps)
		}
		steps = req.MaxSteps
	}
	tr := &events.TurnRequest{
		TurnID: "t" + nuid.Next(), SessionID: req.ID, Model: model, System: g.cfg.System,
		Messages: []events.Message{{Role: events.RoleUser, Content: content}}, Tools: tools, MaxSteps: steps, MaxTokens: g.cfg.MaxTokens,
		Metadata: map[string]any{"via": "gateway"},
	}
	if g.cfg.Agent != "" {
		// The definition's model and tools, unless the request picks.
		tr.Agent = g.cfg.Agent
		if req.Model == "" {
			tr.Model = ""
		}
		if req.Tools == nil {
			tr.Tools = nil
		}
	}
	if err := tr.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	return tr, nil
}

// handleResume is GET /api/chat/{id}/stream, the AI SDK's resume: the
// session's running or paused turn, replayed from its first event and
// then live; 204 when none is active. ?turn=<id> replays that turn of the
// session whatever its state (the UI's history).
func (g *Gateway) handleResume(w http.ResponseWriter, r *http.Request) {
	session := r.PathValue("id")
	if !events.ValidToken(session) {
		writeError(w, badf("chat id: must be 1-256 characters without '.', '*', '>' or spaces, got %q", session))
		return
	}
	if err := g.authorize(r, session, Read); err != nil {
		writeError(w, err)
		return
	}
	ctx := r.Context()
	if id := r.URL.Query().Get("turn"); id != "" {
		if !events.ValidToken(id) {
			writeError(w, badf("turn: not a turn id: %q", id))
			return
		}
		// The filter names the session: a turn of another session is
		// not found here.
		if _, ok, err := g.lastOn(ctx, g.subj.Events(session, id, "*")); err != nil || !ok {
			if err == nil {
				err = fmt.Errorf("%w: session %s has no turn %s", ErrNotFound, session, id)
			}
			writeError(w, err)
			return
		}
		g.stream(w, r, session, id, 0, nil)
		return
	}
	latest, found, err := g.latestTurn(ctx, session)
	if err != nil {
		writeError(w, err)
		return
	}
	if !found || !latest.Active() {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	g.stream(w, r, session, latest.ID, 0, nil)
}

// handleStop is POST /api/chat/{id}/stop: cancel the session's running or
// paused turn. Closing a stream does not stop a turn; this does.
func (g *Gateway) handleStop(w http.ResponseWriter, r *http.Request) {
	session := r.PathValue("id")
	if !events.ValidToken(session) {
		writeError(w, badf("chat id: must be 1-256 characters without '.', '*', '>' or spaces, got %q", session))
		return
	}
	if err := g.authorize(r, session, Write); err != nil {
		writeError(w, err)
		return
	}
	latest, found, err := g.latestTurn(r.Context(), session)
	if err != nil {
		writeError(w, err)
		return
	}
	if !found || !latest.Active() {
		writeError(w, fmt.Errorf("%w: session %s has no running or paused turn", ErrConflict, session))
		return
	}
	if err := g.tc.Cancel(r.Context(), latest.ID); err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]string{"turnId": latest.ID, "status": "stopping"})
}

// handleSessions is GET /api/sessions: the sessions the caller may read.
func (g *Gateway) handleSessions(w http.ResponseWriter, r *http.Request) {
	if err := g.authorize(r, "", Read); err != nil {
		writeError(w, err)
		return
	}
	list, err := g.sessions(r.Context(), func(s string) bool { return g.authorize(r, s, Read) == nil })
	if err != nil {
		writeError(w, err)
		return
	}
	body := map[string]any{"sessions": list}
	if bt, ok := g.cfg.Authorizer.(BearerTokens); ok {
		body["sessionPrefix"] = bt.SessionPrefix(r)
	}
	writeJSON(w, http.StatusOK, body)
}

// Info is the answer of GET /api/info: what a request may choose.
type Info struct {
	Model  string   `json:"model"`
	Models []string `json:"models"`
	Tools  []string `json:"tools"`
	// Prompt is a prompt that fits the default model (the replay demo's
	// recorded question), for the UI's demo button; "" when none.
	Prompt string `json:"prompt,omitempty"`
}

func (g *Gateway) handleInfo(w http.ResponseWriter, r *http.Request) {
	if err := g.authorize(r, "", Read); err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, Info{Model: g.cfg.Model, Models: g.cfg.Models, Tools: g.cfg.Tools, Prompt: g.cfg.Prompt})
}

func (g *Gateway) authorize(r *http.Request, session string, a Access) error {
	if g.cfg.Authorizer == nil {
		return nil
	}
	return g.cfg.Authorizer.Authorize(r, session, a)
}

func decodeBody(body io.Reader, v any) error {
	dec := json.NewDecoder(body)
	if err := dec.Decode(v); err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			return fmt.Errorf("%w: more than %d bytes", ErrTooLarge, mb.Limit)
		}
		if errors.Is(err, io.EOF) {
			return badf("empty body: want the chat request JSON {\"id\", \"messages\", \"trigger\"}")
		}
		return badf("body is not a chat request: %v", err)
	}
	return nil
}

// errorBody is the JSON of every error answer.
type errorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func writeError(w http.ResponseWriter, err error) {
	status, code := http.StatusInternalServerError, "internal"
	switch {
	case errors.Is(err, ErrBadRequest):
		status, code = http.StatusBadRequest, "bad_request"
	case errors.Is(err, ErrUnauthenticated):
		status, code = http.StatusUnauthorized, "unauthenticated"
		w.Header().Set("WWW-Authenticate", `Bearer realm="llmworker"`)
	case errors.Is(err, ErrForbidden):
		status, code = http.StatusForbidden, "forbidden"
	case errors.Is(err, ErrConflict):
		status, code = http.StatusConflict, "conflict"
	case errors.Is(err, ErrNotFound):
		status, code = http.StatusNotFound, "not_found"
	case errors.Is(err, ErrTooLarge):
		status, code = http.StatusRequestEntityTooLarge, "too_large"
	case errors.Is(err, ErrNothingToCompact):
		status, code = http.StatusUnprocessableEntity, "nothing_to_compact"
	case errors.Is(err, ErrUnavailable):
		status, code = http.StatusServiceUnavailable, "unavailable"
	case errors.Is(err, ErrShuttingDown):
		status, code = http.StatusServiceUnavailable, "shutting_down"
	case errors.Is(err, turn.ErrNotProvisioned):
		status, code = http.StatusServiceUnavailable, "not_provisioned"
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
		status, code = http.StatusGatewayTimeout, "timeout"
	}
	var b errorBody
	b.Error.Code, b.Error.Message = code, err.Error()
	writeJSON(w, status, b)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// now is time.Now, for the stream's deadlines.
var now = time.Now
