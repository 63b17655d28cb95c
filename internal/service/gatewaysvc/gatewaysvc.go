// Package gatewaysvc is the HTTP gateway as cmd/gateway and `llmworker
// up` run it: pkg/gateway served on --http.
package gatewaysvc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/internal/service"
	"github.com/llmworker/llmworker/pkg/a2a"
	"github.com/llmworker/llmworker/pkg/gateway"
	"github.com/llmworker/llmworker/pkg/provision"
)

// DefaultHTTP is the address of --http: localhost only.
const DefaultHTTP = "127.0.0.1:8080"

// Options configure the service; the zero value serves on a random
// localhost port without authentication.
type Options struct {
	// HTTP is the listen address ("" = 127.0.0.1:0).
	HTTP string
	// Tokens are comma-separated bearer tokens, each "token" (every
	// session) or "token=prefix" (the sessions whose id starts with
	// prefix); none = no authentication.
	Tokens string
	// Model, Models, Tools, System and MaxSteps are gateway.Config's
	// (Models and Tools comma-separated).
	Model, Models, Tools, System string
	MaxSteps                     int
	// Agent is gateway.Config.Agent.
	Agent string
	// Origins are gateway.Config.AllowOrigins, comma-separated.
	Origins string
	// Prompt is the UI's demo prompt (set by `up --replay`).
	Prompt string
	// A2ADefault is the agent whose card the root
	// /.well-known/agent-card.json serves ("" = none).
	A2ADefault string
	// A2APublicURL is the scheme and host the A2A cards name ("" = the
	// request's).
	A2APublicURL string
}

// Service is the gateway service.
type Service struct {
	Options
	// URL is where it serves once started, e.g. http://127.0.0.1:8080.
	URL string
}

var _ service.Service = (*Service)(nil)

func (*Service) Name() string { return "gateway" }

func (*Service) About() string {
	return `Runs the llmworker HTTP gateway: POST /api/chat speaks the AI SDK's UI
message stream protocol (what useChat talks), GET /api/chat/{id}/stream
resumes a session's running turn from LLMW_EVENTS (after a reload, on any
replica), POST /api/chat/{id}/stop cancels it, and / serves the web UI.
Every agent of the registry LLMW_AGENTS is served over A2A (1.0 and 0.3,
JSON-RPC and REST) at /a2a/NAME, its card at
/a2a/NAME/.well-known/agent-card.json.
Turns run on the turn service. Bound to localhost by default; --tokens
requires bearer tokens, each limited to a session id prefix
(docs/protocol.md, "Gateway"; docs/security.md).`
}

// Flags registers the service's flags.
func (s *Service) Flags(f *service.Flags) {
	f.String(&s.HTTP, "http", "LLMW_HTTP", DefaultHTTP, "gateway: HTTP address of the API and the web UI (localhost by default)")
	f.String(&s.Tokens, "tokens", "LLMW_GATEWAY_TOKENS", "", `gateway: bearer tokens, comma-separated, each "token" or "token=session-prefix" (none = no authentication: keep --http on localhost)`)
	f.String(&s.Model, "chat-model", "LLMW_CHAT_MODEL", "", "gateway: model of the turns (default: replay:anthropic with --replay, else by the credentials set, as llmworker chat picks)")
	f.String(&s.Models, "chat-models", "LLMW_CHAT_MODELS", "", `gateway: comma-separated models a request may pick with "model"`)
	f.String(&s.Tools, "chat-tools", "LLMW_CHAT_TOOLS", "*", `gateway: comma-separated tools of the turns ("*" = all); a request may narrow them`)
	f.String(&s.System, "chat-system", "LLMW_CHAT_SYSTEM", "", "gateway: system prompt of the turns")
	f.String(&s.Agent, "chat-agent", "LLMW_CHAT_AGENT", "", `gateway: agent of LLMW_AGENTS (NAME or NAME@REV) the turns run as: its model, tools, system prompt and sub-agents, unless --chat-system or a request's "model" or "tools" set them`)
	f.String(&s.Origins, "cors-origins", "LLMW_CORS_ORIGINS", "", `gateway: comma-separated web origins whose pages may call the API from the browser, e.g. "http://localhost:3000" (none: same origin only)`)
	f.String(&s.A2ADefault, "a2a-default-agent", "LLMW_A2A_DEFAULT_AGENT", "", "gateway: agent of the root A2A card /.well-known/agent-card.json (every agent is served at /a2a/NAME)")
	f.String(&s.A2APublicURL, "a2a-public-url", "LLMW_A2A_PUBLIC_URL", "", `gateway: scheme and host the A2A cards name, e.g. "https://agents.example.com" (default: the request's)`)
	f.Int(&s.MaxSteps, "chat-max-steps", "LLMW_CHAT_MAX_STEPS", 0, "gateway: model calls per turn (0 = the turn service's default); a request may lower it")
}

// Handler serves the A2A endpoints (/a2a/ and the root card) with a and
// everything else with g.
func Handler(g *gateway.Gateway, a *a2a.Server) http.Handler {
	mux := http.NewServeMux()
	mux.Handle(a2a.PathPrefix, a)
	mux.Handle(a2a.CardPath, a)
	mux.Handle("/", g)
	return mux
}

// ParseTokens reads --tokens.
func ParseTokens(s string) (gateway.BearerTokens, error) {
	items := service.SplitList(s)
	if len(items) == 0 {
		return nil, nil
	}
	out := gateway.BearerTokens{}
	for _, it := range items {
		tok, prefix, _ := strings.Cut(it, "=")
		if len(tok) < 16 {
			return nil, fmt.Errorf("%w: --tokens: a token must have at least 16 characters (got one of %d)", service.ErrUsage, len(tok))
		}
		out[tok] = prefix
	}
	return out, nil
}

// Config is the gateway configuration of the options.
func (s *Service) Config(env service.Env) (gateway.Config, error) {
	cfg := gateway.Config{
		Prefix: env.Prefix, Model: s.Model, Models: service.SplitList(s.Models), Tools: service.SplitList(s.Tools),
		System: s.System, MaxSteps: s.MaxSteps, Agent: s.Agent, Prompt: s.Prompt, Logger: env.Log, AllowOrigins: service.SplitList(s.Origins),
	}
	toks, err := ParseTokens(s.Tokens)
	if err != nil {
		return cfg, err
	}
	if toks != nil {
		cfg.Authorizer = toks
	}
	return cfg, nil
}

// Start serves the gateway.
func (s *Service) Start(ctx context.Context, env service.Env) (service.Stopper, error) {
	cfg, err := s.Config(env)
	if err != nil {
		return nil, err
	}
	// Like every service: create or update (with --provision-verify,
	// check) the streams and buckets before serving.
	js, err := jetstream.New(env.NC)
	if err != nil {
		return nil, err
	}
	if err := provision.Provision(ctx, js, env.Provision()); err != nil {
		return nil, err
	}
	g, err := gateway.New(ctx, env.NC, cfg)
	if errors.Is(err, gateway.ErrConfig) {
		return nil, fmt.Errorf("%w: %w", service.ErrUsage, err)
	}
	if err != nil {
		return nil, err
	}
	addr := s.HTTP
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if errors.Is(err, syscall.EADDRINUSE) {
		return nil, fmt.Errorf("%w: gateway cannot listen on %s: address already in use; pick another with --http host:port (port 0 = random)", service.ErrUsage, addr)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: --http %s: %w", service.ErrUsage, addr, err)
	}
	a, err := a2a.New(ctx, env.NC, a2a.Config{
		Prefix: env.Prefix, DefaultAgent: s.A2ADefault, PublicURL: s.A2APublicURL, Authorizer: cfg.Authorizer, Logger: env.Log,
	})
	if errors.Is(err, a2a.ErrConfig) {
		return nil, fmt.Errorf("%w: %w", service.ErrUsage, err)
	}
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: Handler(g, a), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	s.URL = "http://" + ln.Addr().String()
	env.Log.Info("gateway serving", "url", s.URL, "auth", cfg.Authorizer != nil)
	return service.StopFunc(func(ctx context.Context) error {
		// Streams end first (their turns go on; clients resume them
		// elsewhere), then the server stops.
		g.Close()
		a.Close()
		err := srv.Shutdown(ctx)
		<-done
		return err
	}), nil
}
