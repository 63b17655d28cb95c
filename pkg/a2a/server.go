package a2a

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	spec "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/llmworker/llmworker/pkg/agents"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/gateway"
	"github.com/llmworker/llmworker/pkg/media"
	"github.com/llmworker/llmworker/pkg/turn"
)

// Paths of the A2A endpoints (docs/protocol.md, "A2A").
const (
	// PathPrefix is where each agent is served: PathPrefix + NAME is its
	// JSON-RPC endpoint and the base of its REST endpoints.
	PathPrefix = "/a2a/"
	// CardPath is the card below an agent's URL, and at the root for the
	// default agent.
	CardPath = "/.well-known/agent-card.json"
)

// Config configures a Server. The zero value serves every agent of the
// registry without authentication.
type Config struct {
	// Prefix is the subject prefix ("" = llmw).
	Prefix string
	// DefaultAgent is the agent whose card the root
	// /.well-known/agent-card.json serves ("" = none: 404).
	DefaultAgent string
	// Authorizer decides which sessions (contexts) a caller may read and
	// write, as the gateway's (nil = everyone every session). A
	// gateway.BearerTokens shows on the cards as an HTTP bearer scheme.
	Authorizer gateway.Authorizer
	// PublicURL is the scheme and host the cards name
	// (e.g. "https://agents.example.com"; "" = the request's Host, https
	// when the request came over TLS or X-Forwarded-Proto says so).
	PublicURL string
	// MaxBodyBytes bounds a request body (0 = 32 MiB).
	MaxBodyBytes int64
	// KeepAlive is the interval of SSE comments on idle streams (0 = 15 s).
	KeepAlive time.Duration
	// MaxStreamDuration ends a stream that lasts longer (0 = 1 h); the
	// turn goes on and the client subscribes again.
	MaxStreamDuration time.Duration
	// Logger (nil = discard).
	Logger *slog.Logger
}

func (c *Config) defaults() error {
	if c.DefaultAgent != "" && !events.ValidAgentName(c.DefaultAgent) {
		return fmt.Errorf("%w: DefaultAgent %q is no agent name", ErrConfig, c.DefaultAgent)
	}
	if c.MaxBodyBytes < 0 {
		return fmt.Errorf("%w: MaxBodyBytes must not be negative", ErrConfig)
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = 32 << 20
	}
	if c.KeepAlive <= 0 {
		c.KeepAlive = 15 * time.Second
	}
	if c.MaxStreamDuration <= 0 {
		c.MaxStreamDuration = time.Hour
	}
	c.PublicURL = strings.TrimRight(c.PublicURL, "/")
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Server serves every agent of the registry LLMW_AGENTS over the A2A
// protocol, version 1.0 and 0.3, with a2a-go's JSON-RPC and REST
// bindings. A task is a turn: it keeps no state of its own, every answer
// comes from LLMW_EVENTS, so any replica answers any request.
type Server struct {
	cfg    Config
	js     jetstream.JetStream
	events jetstream.Stream
	tc     *turn.Client
	reg    *agents.Registry
	subj   events.Subjects
	media  media.Lazy

	stopPush func()

	mu      sync.Mutex
	closed  bool
	done    chan struct{}
	streams sync.WaitGroup
}

var _ http.Handler = (*Server)(nil)

// New returns a server on nc. LLMW_EVENTS and LLMW_TURNS must exist
// (llmworker provision, or any service's start); LLMW_AGENTS is read when
// a request names an agent.
func New(ctx context.Context, nc *nats.Conn, cfg Config) (*Server, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("a2a: jetstream: %w", err)
	}
	st, err := js.Stream(ctx, events.StreamEvents)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, fmt.Errorf("%w: no stream %s (run llmworker provision, or start llmworker up)", turn.ErrNotProvisioned, events.StreamEvents)
	}
	if err != nil {
		return nil, fmt.Errorf("a2a: stream %s: %w", events.StreamEvents, err)
	}
	tc, err := turn.NewClient(nc, turn.ClientOptions{Prefix: cfg.Prefix, Source: events.Source("a2a", nuid.Next())})
	if err != nil {
		return nil, err
	}
	s := &Server{
		cfg: cfg, js: js, events: st, tc: tc, reg: agents.New(js), subj: events.NewSubjects(cfg.Prefix),
		media: media.Lazy{JS: js}, done: make(chan struct{}),
	}
	if s.stopPush, err = s.startPush(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// Close ends every open stream (their turns go on; clients subscribe
// again) and waits for them, and stops sending push notifications
// (another replica sends them).
func (s *Server) Close() {
	s.mu.Lock()
	first := !s.closed
	if first {
		s.closed = true
		close(s.done)
	}
	s.mu.Unlock()
	if first {
		s.stopPush()
	}
	s.streams.Wait()
}

func (s *Server) open() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.streams.Add(1)
	return true
}

// ServeHTTP serves /a2a/NAME (JSON-RPC, both versions),
// /a2a/NAME/<REST path>, /a2a/NAME/.well-known/agent-card.json and the
// root /.well-known/agent-card.json. Other paths are not found.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == CardPath {
		if s.cfg.DefaultAgent == "" {
			notFound(w, fmt.Errorf("%w: no default agent is configured; each agent's card is at %sNAME%s", ErrUnknownAgent, PathPrefix, CardPath))
			return
		}
		s.serveCard(w, r, s.cfg.DefaultAgent)
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, PathPrefix)
	if !ok {
		notFound(w, fmt.Errorf("no endpoint %s (see docs/protocol.md, \"A2A\")", r.URL.Path))
		return
	}
	name, sub, _ := strings.Cut(rest, "/")
	if !events.ValidAgentName(name) {
		notFound(w, fmt.Errorf("%w: %q is no agent name", ErrUnknownAgent, name))
		return
	}
	if sub == strings.TrimPrefix(CardPath, "/") {
		s.serveCard(w, r, name)
		return
	}
	ag, err := s.reg.Resolve(r.Context(), name)
	if err != nil {
		s.agentError(w, name, err)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes)
	var h a2asrv.RequestHandler = &handler{s: s, agent: ag, r: r}
	if v := r.Header.Get(spec.SvcParamVersion); v != "" && !supported(v) {
		h = refusing{spec.NewError(spec.ErrVersionNotSupported, fmt.Sprintf("A2A-Version %q: this server speaks 1.0 and 0.3", v))}
	}
	opts := []a2asrv.TransportOption{a2asrv.WithTransportKeepAlive(s.cfg.KeepAlive)}
	if sub == "" {
		// One URL, both versions: the method names tell them apart
		// ("message/send" is 0.3's, "SendMessage" 1.0's).
		body, err := io.ReadAll(r.Body)
		if err != nil {
			// a2a-go answers the truncated body with its parse error.
			body = nil
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		var peek struct {
			Method string `json:"method"`
		}
		if json.Unmarshal(body, &peek) == nil && strings.Contains(peek.Method, "/") {
			a2av0.NewJSONRPCHandler(h, opts...).ServeHTTP(w, r)
			return
		}
		a2asrv.NewJSONRPCHandler(h, opts...).ServeHTTP(w, r)
		return
	}
	// REST: the A2A-Version header says which binding (none = 1.0).
	r2 := r.Clone(r.Context())
	r2.URL.Path = "/" + sub
	r2.URL.RawPath = ""
	if strings.HasPrefix(r.Header.Get(spec.SvcParamVersion), "0.") {
		a2av0.NewRESTHandler(h, opts...).ServeHTTP(w, r2)
		return
	}
	a2asrv.NewRESTHandler(h, opts...).ServeHTTP(w, r2)
}

// supported reports whether an A2A-Version header names a version this
// server speaks: 1.0 (1.x) or 0.3.
func supported(v string) bool {
	return strings.HasPrefix(v, "1.") || v == "0.3" || strings.HasPrefix(v, "0.3.")
}

// serveCard answers an agent's card with a2a-go's card handler: in the
// union of the 1.0 and 0.3 forms, which clients of both read, or, for a
// request with the header A2A-Version 1.x, in the 1.0 form.
func (s *Server) serveCard(w http.ResponseWriter, r *http.Request, name string) {
	ag, err := s.reg.Resolve(r.Context(), name)
	if err != nil {
		s.agentError(w, name, err)
		return
	}
	card := s.Card(ag, s.baseURL(r))
	if strings.HasPrefix(r.Header.Get(spec.SvcParamVersion), "1.") {
		// A client that says it speaks 1.0 gets the 1.0 card alone: the
		// union's security schemes are in their 0.3 form, which a 1.0
		// parser (a2a-go's DefaultCardParser) does not read.
		a2asrv.NewStaticAgentCardHandler(card).ServeHTTP(w, r)
		return
	}
	a2asrv.NewAgentCardHandler(a2av0.NewStaticAgentCardProducer(card)).ServeHTTP(w, r)
}

func (s *Server) agentError(w http.ResponseWriter, name string, err error) {
	if errors.Is(err, agents.ErrUnknownAgent) {
		notFound(w, fmt.Errorf("%w: %s (llmworker agent list)", ErrUnknownAgent, name))
		return
	}
	s.cfg.Logger.Warn("a2a: resolve agent", "agent", name, "err", err)
	writeJSON(w, http.StatusServiceUnavailable, errorBody("unavailable", err))
}

func (s *Server) baseURL(r *http.Request) string {
	if s.cfg.PublicURL != "" {
		return s.cfg.PublicURL
	}
	scheme := "http"
	if r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https") {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// Card is the A2A card of an agent served under base (scheme and host):
// name, description, version = the definition's revision, one skill (the
// agent itself), streaming, and the interfaces of both versions and both
// bindings at base/a2a/NAME.
func (s *Server) Card(ag agents.Agent, base string) *spec.AgentCard {
	d := ag.AgentDefinition
	url := base + PathPrefix + d.Name
	desc := d.Description
	if desc == "" {
		desc = "llmworker agent " + d.Name
	}
	card := &spec.AgentCard{
		Name: d.Name, Description: desc, Version: strconv.FormatUint(ag.Revision, 10),
		SupportedInterfaces: []*spec.AgentInterface{
			{URL: url, ProtocolBinding: spec.TransportProtocolJSONRPC, ProtocolVersion: spec.Version},
			{URL: url, ProtocolBinding: spec.TransportProtocolHTTPJSON, ProtocolVersion: spec.Version},
			{URL: url, ProtocolBinding: spec.TransportProtocolJSONRPC, ProtocolVersion: a2av0.Version},
			{URL: url, ProtocolBinding: spec.TransportProtocolHTTPJSON, ProtocolVersion: a2av0.Version},
		},
		Capabilities:       spec.AgentCapabilities{Streaming: true, PushNotifications: true},
		DefaultInputModes:  inputModes(),
		DefaultOutputModes: []string{"text/plain", "application/json"},
		Skills: []spec.AgentSkill{{
			ID: d.Name, Name: d.Name, Description: desc, Tags: []string{"llmworker"},
		}},
		Provider: &spec.AgentProvider{Org: "llmworker", URL: base},
	}
	if d.ResponseFormat != nil {
		card.Skills[0].OutputModes = []string{"application/json"}
	}
	if _, ok := s.cfg.Authorizer.(gateway.BearerTokens); ok {
		card.SecuritySchemes = spec.NamedSecuritySchemes{
			"bearer": spec.HTTPAuthSecurityScheme{Scheme: "Bearer", Description: "a token of the gateway's --tokens"},
		}
		card.SecurityRequirements = spec.SecurityRequirementsOptions{{"bearer": {}}}
	}
	return card
}

// inputModes are the media types a message's parts may have: text, data
// (JSON), and the turn's image and file types.
func inputModes() []string {
	out := []string{"text/plain", "application/json"}
	for _, mt := range slices.Concat(events.ImageMediaTypes, events.FileMediaTypes) {
		if !slices.Contains(out, mt) {
			out = append(out, mt)
		}
	}
	return out
}

func notFound(w http.ResponseWriter, err error) {
	writeJSON(w, http.StatusNotFound, errorBody("not_found", err))
}

func errorBody(code string, err error) map[string]any {
	return map[string]any{"error": map[string]string{"code": code, "message": err.Error()}}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
