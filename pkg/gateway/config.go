package gateway

import (
	"crypto/subtle"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"
)

// Config configures a Gateway. The zero value works for a gateway on
// localhost: no authentication, model replay:anthropic, every tool.
type Config struct {
	// Prefix is the subject prefix ("" = llmw).
	Prefix string
	// Model of a request that names none ("" = replay:anthropic, the
	// recorded demo).
	Model string
	// Models a request may pick with "model" (the AI SDK's body option);
	// empty = only Model.
	Models []string
	// System is the system prompt of every turn; a request cannot set it.
	System string
	// Agent, when set, runs every turn as this agent of LLMW_AGENTS (NAME
	// or NAME@REV, docs/protocol.md §5 "Agents"): the definition's model,
	// tools, system prompt and sub-agents, over which a request's "model"
	// and "tools", System and MaxSteps still win when set.
	Agent string
	// Tools are the tool patterns of a turn ("" entries ignored; nil =
	// "*"). A request's "tools" may only narrow them: each must be one of
	// these names, or any name when they hold "*".
	Tools []string
	// MaxSteps of a turn (0 = the turn service's default); a request's
	// "maxSteps" may only lower it.
	MaxSteps int
	// MaxTokens per model call (0 = the provider's default).
	MaxTokens int
	// Authorizer decides which sessions a caller may read and write (nil
	// = everyone every session: bind to localhost).
	Authorizer Authorizer
	// MaxBodyBytes bounds a request body (0 = 32 MiB: useChat sends the
	// attachments of the whole conversation with every message).
	MaxBodyBytes int64
	// WriteTimeout bounds each write of a stream to a client that stopped
	// reading (0 = 30 s).
	WriteTimeout time.Duration
	// MaxStreamDuration ends a stream that lasts longer (0 = 1 h); the
	// turn goes on and the client resumes it.
	MaxStreamDuration time.Duration
	// KeepAlive is the interval of SSE comments that keep idle streams
	// open through proxies (0 = 15 s).
	KeepAlive time.Duration
	// AllowOrigins are the web origins (e.g. "http://localhost:3000") whose
	// pages may call /api from the browser (CORS); none = same origin only,
	// the web UI's. "*" allows any origin: only with an Authorizer whose
	// credentials a foreign page cannot hold.
	AllowOrigins []string
	// Prompt is suggested by the UI's demo button (GET /api/info).
	Prompt string
	// NoUI leaves the web UI out (only /api is served).
	NoUI bool
	// Logger (nil = discard).
	Logger *slog.Logger
}

// DefaultModel is the model of a Config without one: the replay demo,
// which needs no API key.
const DefaultModel = "replay:anthropic"

func (c *Config) defaults() error {
	if c.Model == "" {
		c.Model = DefaultModel
	}
	if len(c.Models) == 0 {
		c.Models = []string{c.Model}
	} else if !slices.Contains(c.Models, c.Model) {
		c.Models = append([]string{c.Model}, c.Models...)
	}
	c.Tools = slices.DeleteFunc(slices.Clone(c.Tools), func(s string) bool { return s == "" })
	if len(c.Tools) == 0 {
		c.Tools = []string{"*"}
	}
	if c.MaxSteps < 0 || c.MaxTokens < 0 || c.MaxBodyBytes < 0 {
		return fmt.Errorf("%w: MaxSteps, MaxTokens and MaxBodyBytes must not be negative", ErrConfig)
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = 32 << 20
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = 30 * time.Second
	}
	if c.MaxStreamDuration <= 0 {
		c.MaxStreamDuration = time.Hour
	}
	if c.KeepAlive <= 0 {
		c.KeepAlive = 15 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Access is what a caller wants to do with a session.
type Access int

const (
	// Read is following a session's turns and listing it.
	Read Access = iota
	// Write is sending it messages, approvals and stops.
	Write
)

func (a Access) String() string {
	if a == Write {
		return "write"
	}
	return "read"
}

// Authorizer decides whether the caller of r may access session (""
// asks only whether the caller is authenticated, e.g. to list sessions).
// It returns nil, or an error matching ErrUnauthenticated (answered 401)
// or ErrForbidden (403).
type Authorizer interface {
	Authorize(r *http.Request, session string, access Access) error
}

// AuthorizerFunc adapts a function to Authorizer.
type AuthorizerFunc func(r *http.Request, session string, access Access) error

// Authorize calls f.
func (f AuthorizerFunc) Authorize(r *http.Request, session string, access Access) error {
	return f(r, session, access)
}

var _ Authorizer = AuthorizerFunc(nil)

// BearerTokens is an Authorizer of bearer tokens ("Authorization: Bearer
// <token>"): each token grants read and write of the sessions whose id
// starts with its prefix ("" = every session). A caller with the token of
// prefix "alice-" can neither read nor write session "bob-1".
type BearerTokens map[string]string

var _ Authorizer = BearerTokens(nil)

// Authorize checks the token in constant time per known token.
func (t BearerTokens) Authorize(r *http.Request, session string, _ Access) error {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || tok == "" {
		return fmt.Errorf("%w: send Authorization: Bearer <token>", ErrUnauthenticated)
	}
	prefix, found := "", false
	for k, p := range t {
		if subtle.ConstantTimeCompare([]byte(k), []byte(tok)) == 1 {
			prefix, found = p, true
		}
	}
	if !found {
		return fmt.Errorf("%w: unknown token", ErrUnauthenticated)
	}
	if session != "" && !strings.HasPrefix(session, prefix) {
		return fmt.Errorf("%w: this token grants the sessions %q…, not %q", ErrForbidden, prefix, session)
	}
	return nil
}

// SessionPrefix returns the prefix the request's token grants, for a UI
// that names new sessions ("" when none or unknown).
func (t BearerTokens) SessionPrefix(r *http.Request) string {
	tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	for k, p := range t {
		if subtle.ConstantTimeCompare([]byte(k), []byte(tok)) == 1 {
			return p
		}
	}
	return ""
}
