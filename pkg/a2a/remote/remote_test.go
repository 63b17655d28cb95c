package remote_test

import (
	"context"
	"errors"
	"iter"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	spec "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"go.uber.org/goleak"

	"github.com/llmworker/llmworker/pkg/a2a/remote"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// echo answers a message with one artifact holding its text.
type echo struct{}

func (echo) Execute(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[spec.Event, error] {
	return func(yield func(spec.Event, error) bool) {
		if !yield(spec.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		a := spec.NewArtifactEvent(ec, spec.NewTextPart("echo: "+ec.Message.Parts[0].Text()))
		a.LastChunk = true
		if !yield(a, nil) {
			return
		}
		yield(spec.NewStatusUpdateEvent(ec, spec.TaskStateCompleted, nil), nil)
	}
}

func (echo) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[spec.Event, error] {
	return func(yield func(spec.Event, error) bool) {
		yield(spec.NewStatusUpdateEvent(ec, spec.TaskStateCanceled, nil), nil)
	}
}

// authSeen records the Authorization header of each request a handler
// gets.
type authSeen struct {
	mu   sync.Mutex
	seen []string
}

func (a *authSeen) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		a.seen = append(a.seen, r.Header.Get("Authorization"))
		a.mu.Unlock()
		h.ServeHTTP(w, r)
	})
}

func (a *authSeen) all() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.seen...)
}

// The token goes to the host of the agent's URL (the card's) and to no
// other: a card whose interface is on another host gets its calls
// without it.
func TestTokenOnlyToTheAgentsHost(t *testing.T) {
	var cardAuth, otherAuth authSeen
	other := httptest.NewServer(otherAuth.wrap(a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(echo{}))))
	defer other.Close()
	card := &spec.AgentCard{Name: "echo", Version: "1", SupportedInterfaces: []*spec.AgentInterface{spec.NewAgentInterface(other.URL, spec.TransportProtocolJSONRPC)}}
	mux := http.NewServeMux()
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(card))
	home := httptest.NewServer(cardAuth.wrap(mux))
	defer home.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a, err := remote.Open(ctx, home.URL, remote.Config{Token: "s3cret-token", PollInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = a.Close() }()
	task, err := a.Send(ctx, "m-1", "hi")
	if err != nil {
		t.Fatal(err)
	}
	done, err := a.Follow(ctx, task.ID, func(remote.Update) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if done.State != remote.StateCompleted || done.Answer() != "echo: hi" {
		t.Fatalf("task %+v; want completed with the echo", done)
	}
	if got := cardAuth.all(); len(got) != 1 || got[0] != "Bearer s3cret-token" {
		t.Fatalf("the card's host got Authorization %q; want the token once (the card)", got)
	}
	for _, h := range otherAuth.all() {
		if h != "" {
			t.Fatalf("another host got Authorization %q; want none", h)
		}
	}
	if len(otherAuth.all()) == 0 {
		t.Fatal("the interface's host got no request")
	}
}

// Open refuses what is not an absolute http(s) URL and a card that
// cannot be fetched, naming the URL.
func TestOpenErrors(t *testing.T) {
	ctx := context.Background()
	for _, u := range []string{"ftp://x/y", "/relative", "http://"} {
		if _, err := remote.Open(ctx, u, remote.Config{}); err == nil {
			t.Errorf("Open(%q) = nil error", u)
		}
	}
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	_, err := remote.Open(ctx, srv.URL, remote.Config{})
	if err == nil || !errors.Is(err, remote.ErrCard) {
		t.Fatalf("Open of a URL without a card: %v; want ErrCard", err)
	}
}

func TestTokenEnv(t *testing.T) {
	if got := remote.TokenEnv("researcher-2"); got != "LLMW_A2A_TOKEN_RESEARCHER_2" {
		t.Fatalf("TokenEnv = %q", got)
	}
	t.Setenv("LLMW_A2A_TOKEN_WEATHER", "tok")
	if remote.TokenFor("weather") != "tok" {
		t.Fatal("TokenFor does not read the variable")
	}
}
