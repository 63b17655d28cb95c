package remote

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	spec "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/llmworker/llmworker/pkg/turn"
)

// Config tunes Open. The zero value is usable.
type Config struct {
	// Token is a bearer token sent as "Authorization: Bearer <token>" on
	// every request to the host of the agent's URL (the card's fetch
	// included), and on none to another host.
	Token string
	// HTTPClient makes the requests (its Transport is wrapped to add the
	// token). nil: a client without an overall timeout, since a task's
	// stream lasts as long as the task, whose responses must start within
	// 30 seconds.
	HTTPClient *http.Client
	// PollInterval is how often Follow reads a task (GetTask) when the
	// card declares no streaming; 1 s when 0.
	PollInterval time.Duration
}

// TokenEnv is the environment variable the turn service reads the bearer
// token of remote agent name from: LLMW_A2A_TOKEN_ and the name upper
// case, each "-" an "_" (researcher-2 → LLMW_A2A_TOKEN_RESEARCHER_2).
func TokenEnv(name string) string {
	return "LLMW_A2A_TOKEN_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// TokenFor is the token TokenEnv(name) holds ("" when unset).
func TokenFor(name string) string { return os.Getenv(TokenEnv(name)) }

// Agent is a remote agent: its card, and a2a-go's client on the card's
// interface it chose.
type Agent struct {
	card   *spec.AgentCard
	client *a2aclient.Client
	every  time.Duration
	// own is the transport Open made (nil with Config.HTTPClient):
	// Close closes its idle connections.
	own *http.Transport
}

// Open fetches the card of the agent at agentURL — the card's own URL
// when it ends in ".json", else agentURL + /.well-known/agent-card.json —
// in its 1.0 form or else its 0.3 form, and makes a2a-go's client on the
// first of the card's interfaces it speaks: JSON-RPC or HTTP+JSON, 1.0 or
// 0.3. Errors match ErrCard.
func Open(ctx context.Context, agentURL string, cfg Config) (*Agent, error) {
	u, err := url.Parse(agentURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%w: %q is not an absolute http(s) URL", ErrCard, agentURL)
	}
	hc := cfg.HTTPClient
	var own *http.Transport
	if hc == nil {
		own = &http.Transport{Proxy: http.ProxyFromEnvironment, ResponseHeaderTimeout: 30 * time.Second, IdleConnTimeout: 90 * time.Second}
		hc = &http.Client{Transport: own}
	}
	if cfg.Token != "" {
		c := *hc
		base := c.Transport
		if base == nil {
			base = http.DefaultTransport
		}
		c.Transport = &bearer{base: base, host: u.Host, token: cfg.Token}
		hc = &c
	}
	base, path := agentURL, a2asrv.WellKnownAgentCardPath
	if strings.HasSuffix(u.Path, ".json") {
		base, path = (&url.URL{Scheme: u.Scheme, Host: u.Host}).String(), u.Path
	}
	card, err := (&agentcard.Resolver{Client: hc, CardParser: parseCard}).Resolve(ctx, base, agentcard.WithPath(path))
	if err != nil {
		closeIdle(own)
		return nil, fmt.Errorf("%w: %s: %w", ErrCard, agentURL, err)
	}
	client, err := a2aclient.NewFromCard(ctx, card,
		a2aclient.WithDefaultsDisabled(),
		a2aclient.WithJSONRPCTransport(hc), a2aclient.WithRESTTransport(hc),
		a2av0.WithJSONRPCTransport(a2av0.JSONRPCTransportConfig{Client: hc}),
		a2av0.WithRESTTransport(a2av0.RESTTransportConfig{Client: hc}))
	if err != nil {
		closeIdle(own)
		return nil, fmt.Errorf("%w: %s: %w", ErrCard, agentURL, err)
	}
	poll := cfg.PollInterval
	if poll <= 0 {
		poll = time.Second
	}
	return &Agent{card: card, client: client, every: poll, own: own}, nil
}

func closeIdle(t *http.Transport) {
	if t != nil {
		t.CloseIdleConnections()
	}
}

// parseCard reads a card in its 1.0 form, or else in its 0.3 form (url,
// preferredTransport, additionalInterfaces), which a2a-go's default
// parser reads as a card without interfaces.
func parseCard(b []byte) (*spec.AgentCard, error) {
	card, err := agentcard.DefaultCardParser(b)
	if err == nil && len(card.SupportedInterfaces) > 0 {
		return card, nil
	}
	if old, err0 := a2av0.NewAgentCardParser()(b); err0 == nil && len(old.SupportedInterfaces) > 0 {
		return old, nil
	}
	if err != nil {
		return nil, err
	}
	return nil, errors.New("the card names no interface (supportedInterfaces, or 0.3's url)")
}

// bearer adds the token to the requests to one host.
type bearer struct {
	base  http.RoundTripper
	host  string
	token string
}

func (b *bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Host != b.host {
		return b.base.RoundTrip(r)
	}
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

// Name is the card's name.
func (a *Agent) Name() string { return a.card.Name }

// Streaming says whether the card declares streaming: Follow subscribes
// to the task, else it polls it.
func (a *Agent) Streaming() bool { return a.card.Capabilities.Streaming }

// Close releases the client and the idle connections of the transport
// Open made.
func (a *Agent) Close() error {
	err := a.client.Destroy()
	closeIdle(a.own)
	return err
}

// The remote task as pkg/turn's RemoteAgent, which Agent is, reports
// it.
type (
	State    = turn.RemoteState
	Task     = turn.RemoteTask
	Artifact = turn.RemoteArtifact
	Update   = turn.RemoteUpdate
)

const (
	StateSubmitted     = turn.RemoteSubmitted
	StateWorking       = turn.RemoteWorking
	StateInputRequired = turn.RemoteInputRequired
	StateAuthRequired  = turn.RemoteAuthRequired
	StateCompleted     = turn.RemoteCompleted
	StateFailed        = turn.RemoteFailed
	StateCanceled      = turn.RemoteCanceled
	StateRejected      = turn.RemoteRejected
)

var _ turn.RemoteAgent = (*Agent)(nil)

// Agents is the turn service's A2A client (turn.Config.RemoteAgents): it
// opens agent name at its a2a_url with cfg, and with the bearer token
// TokenFor(name) when cfg has none.
func Agents(cfg Config) turn.RemoteAgents {
	return turn.RemoteAgentsFunc(func(ctx context.Context, name, url string) (turn.RemoteAgent, error) {
		c := cfg
		if c.Token == "" {
			c.Token = TokenFor(name)
		}
		a, err := Open(ctx, url, c)
		if err != nil {
			return nil, err // not a nil *Agent in a RemoteAgent
		}
		return a, nil
	})
}

func stateOf(s spec.TaskState) State {
	switch s {
	case spec.TaskStateSubmitted:
		return StateSubmitted
	case spec.TaskStateInputRequired:
		return StateInputRequired
	case spec.TaskStateAuthRequired:
		return StateAuthRequired
	case spec.TaskStateCompleted:
		return StateCompleted
	case spec.TaskStateFailed:
		return StateFailed
	case spec.TaskStateCanceled:
		return StateCanceled
	case spec.TaskStateRejected:
		return StateRejected
	}
	return StateWorking
}

// textOf is the text of parts: its text parts, and each data part as
// its JSON.
func textOf(parts spec.ContentParts) string {
	var b strings.Builder
	for _, p := range parts {
		if p == nil {
			continue
		}
		switch c := p.Content.(type) {
		case spec.Text:
			b.WriteString(string(c))
		case spec.Data:
			if j, err := json.Marshal(c.Value); err == nil {
				b.Write(j)
			}
		}
	}
	return b.String()
}

// partsOf is every part of parts in pkg/turn's terms: text, data (its
// JSON), and a file by its bytes (raw) or its URL, with the part's
// mediaType and filename.
func partsOf(parts spec.ContentParts) []turn.RemotePart {
	var out []turn.RemotePart
	for _, p := range parts {
		if p == nil {
			continue
		}
		rp := turn.RemotePart{MediaType: p.MediaType, Name: p.Filename}
		switch c := p.Content.(type) {
		case spec.Text:
			rp.Kind, rp.Text = turn.RemoteTextPart, string(c)
		case spec.Data:
			j, err := json.Marshal(c.Value)
			if err != nil {
				continue // a value decoded from JSON marshals again
			}
			rp.Kind, rp.Data = turn.RemoteDataPart, j
		case spec.Raw:
			rp.Kind, rp.Raw = turn.RemoteFilePart, []byte(c)
		case spec.URL:
			rp.Kind, rp.URL = turn.RemoteFilePart, string(c)
		default:
			continue
		}
		out = append(out, rp)
	}
	return out
}

func messageText(m *spec.Message) string {
	if m == nil {
		return ""
	}
	return textOf(m.Parts)
}

func taskOf(t *spec.Task) *Task {
	out := &Task{ID: string(t.ID), ContextID: t.ContextID, State: stateOf(t.Status.State), Message: messageText(t.Status.Message)}
	for _, a := range t.Artifacts {
		out.Artifacts = append(out.Artifacts, Artifact{ID: string(a.ID), Name: a.Name, Text: textOf(a.Parts), Parts: partsOf(a.Parts)})
	}
	return out
}

// Send sends a user message of text to the agent, with message id msgID,
// and returns the task it started once the agent accepted it (its
// configuration asks for an answer at once: returnImmediately, 0.3's
// blocking false). An agent that answers with a message and no task
// gives a completed Task without an id, the message its one artifact.
// Errors match ErrRemote.
func (a *Agent) Send(ctx context.Context, msgID, text string) (*Task, error) {
	m := spec.NewMessage(spec.MessageRoleUser, spec.NewTextPart(text))
	m.ID = msgID
	return a.send(ctx, m)
}

// Reply sends text to task, which waits for input, with message id
// msgID, and returns the task as the agent answered. Errors match
// ErrRemote.
func (a *Agent) Reply(ctx context.Context, task *Task, msgID, text string) (*Task, error) {
	m := spec.NewMessageForTask(spec.MessageRoleUser, spec.TaskInfo{TaskID: spec.TaskID(task.ID), ContextID: task.ContextID}, spec.NewTextPart(text))
	m.ID = msgID
	return a.send(ctx, m)
}

func (a *Agent) send(ctx context.Context, m *spec.Message) (*Task, error) {
	res, err := a.client.SendMessage(ctx, &spec.SendMessageRequest{Message: m, Config: &spec.SendMessageConfig{ReturnImmediately: true}})
	if err != nil {
		return nil, fmt.Errorf("%w: send message %s: %w", ErrRemote, m.ID, err)
	}
	switch r := res.(type) {
	case *spec.Task:
		return taskOf(r), nil
	case *spec.Message:
		return &Task{ContextID: r.ContextID, State: StateCompleted, Artifacts: []Artifact{{ID: r.ID, Text: messageText(r), Parts: partsOf(r.Parts)}}}, nil
	}
	return nil, fmt.Errorf("%w: send message %s: an answer of type %T", ErrRemote, m.ID, res)
}

// Get reads the task. Errors match ErrRemote.
func (a *Agent) Get(ctx context.Context, id string) (*Task, error) {
	t, err := a.client.GetTask(ctx, &spec.GetTaskRequest{ID: spec.TaskID(id)})
	if err != nil {
		return nil, fmt.Errorf("%w: get task %s: %w", ErrRemote, id, err)
	}
	return taskOf(t), nil
}

// Cancel asks the agent to cancel the task. Errors match ErrRemote.
func (a *Agent) Cancel(ctx context.Context, id string) error {
	if _, err := a.client.CancelTask(ctx, &spec.CancelTaskRequest{ID: spec.TaskID(id)}); err != nil {
		return fmt.Errorf("%w: cancel task %s: %w", ErrRemote, id, err)
	}
	return nil
}

// followAttempts bounds how often Follow subscribes again (or reads the
// task again) after a stream or a read that failed, in a row.
const followAttempts = 5

// Follow follows task id until it is final or waits for input, calling
// f with each update: with the card's streaming, SubscribeToTask (the
// task as it stands first, as its artifacts, then its updates), again
// after a stream that broke; else GetTask every PollInterval, an
// artifact's text reported as it grows. It returns the task as GetTask
// reads it then (every artifact whole), after reporting what the
// updates did not bring of its artifacts (a task that ended before the
// subscription, a stream that broke): every artifact's text reaches f.
// f's error ends Follow with it; so does ctx's end. Errors match
// ErrRemote.
func (a *Agent) Follow(ctx context.Context, id string, f func(Update) error) (*Task, error) {
	sent := map[string]string{}
	track := func(u Update) error {
		if u.Artifact != nil {
			if u.Append {
				sent[u.Artifact.ID] += u.Artifact.Text
			} else {
				sent[u.Artifact.ID] = u.Artifact.Text
			}
		}
		return f(u)
	}
	var t *Task
	var err error
	if a.Streaming() {
		t, err = a.stream(ctx, id, track)
	} else {
		t, err = a.poll(ctx, id, track)
	}
	if err != nil {
		return nil, err
	}
	for i := range t.Artifacts {
		art := t.Artifacts[i]
		old, seen := sent[art.ID]
		if seen && old == art.Text {
			continue
		}
		u := Update{Artifact: &art, Last: true}
		if seen && strings.HasPrefix(art.Text, old) {
			art.Text, art.Parts, u.Append = art.Text[len(old):], nil, true
		}
		if err := f(u); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// stream follows the task with SubscribeToTask.
func (a *Agent) stream(ctx context.Context, id string, f func(Update) error) (*Task, error) {
	fails := 0
	for {
		end, err := a.subscribe(ctx, id, f)
		if err != nil && (ctx.Err() != nil || !errors.Is(err, ErrRemote)) {
			return nil, err
		}
		// The stream ended (the task is final or waits), broke, or was
		// refused (a task final already): the task says which.
		t, gerr := a.Get(ctx, id)
		switch {
		case gerr != nil && ctx.Err() != nil:
			return nil, ctx.Err()
		case gerr != nil:
			fails++
			if fails >= followAttempts {
				return nil, gerr
			}
		case t.State.Final() || t.State.Waits():
			if !end && t.State.Waits() {
				if err := f(Update{State: t.State, Message: t.Message}); err != nil {
					return nil, err
				}
			}
			return t, nil
		case err == nil:
			fails = 0
		default:
			fails++
			if fails >= followAttempts {
				return nil, err
			}
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Duration(fails) * 200 * time.Millisecond):
		}
	}
}

// subscribe reads one stream of the task; end says it reported the
// task's final or waiting state.
func (a *Agent) subscribe(ctx context.Context, id string, f func(Update) error) (end bool, err error) {
	for ev, err := range a.client.SubscribeToTask(ctx, &spec.SubscribeToTaskRequest{ID: spec.TaskID(id)}) {
		if err != nil {
			return end, fmt.Errorf("%w: subscribe to task %s: %w", ErrRemote, id, err)
		}
		var ups []Update
		switch e := ev.(type) {
		case *spec.Task:
			t := taskOf(e)
			// The artifacts so far, which updates may continue.
			for i := range t.Artifacts {
				ups = append(ups, Update{Artifact: &t.Artifacts[i]})
			}
			ups = append(ups, Update{State: t.State, Message: t.Message})
		case *spec.TaskStatusUpdateEvent:
			ups = append(ups, Update{State: stateOf(e.Status.State), Message: messageText(e.Status.Message)})
		case *spec.TaskArtifactUpdateEvent:
			if e.Artifact != nil {
				ups = append(ups, Update{Artifact: &Artifact{ID: string(e.Artifact.ID), Name: e.Artifact.Name, Text: textOf(e.Artifact.Parts), Parts: partsOf(e.Artifact.Parts)}, Append: e.Append, Last: e.LastChunk})
			}
		case *spec.Message:
			ups = append(ups, Update{State: StateWorking, Message: messageText(e)})
		}
		for _, u := range ups {
			if err := f(u); err != nil {
				return end, err
			}
			if u.State.Final() || u.State.Waits() {
				return true, nil
			}
		}
	}
	return end, nil
}

// poll follows the task with GetTask.
func (a *Agent) poll(ctx context.Context, id string, f func(Update) error) (*Task, error) {
	seen := map[string]string{}
	last, lastMsg := State(""), ""
	fails := 0
	for {
		t, err := a.Get(ctx, id)
		switch {
		case err != nil && ctx.Err() != nil:
			return nil, ctx.Err()
		case err != nil:
			fails++
			if fails >= followAttempts {
				return nil, err
			}
		default:
			fails = 0
			for _, art := range t.Artifacts {
				old := seen[art.ID]
				if old == art.Text {
					continue
				}
				seen[art.ID] = art.Text
				u := Update{Artifact: &Artifact{ID: art.ID, Name: art.Name, Text: art.Text}}
				if old != "" && strings.HasPrefix(art.Text, old) {
					u.Artifact.Text, u.Append = art.Text[len(old):], true
				}
				if err := f(u); err != nil {
					return nil, err
				}
			}
			if t.State != last || t.Message != lastMsg {
				last, lastMsg = t.State, t.Message
				if err := f(Update{State: t.State, Message: t.Message}); err != nil {
					return nil, err
				}
			}
			if t.State.Final() || t.State.Waits() {
				return t, nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(a.every):
		}
	}
}
