package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/llmworker/llmworker/internal/service"
	"github.com/llmworker/llmworker/internal/service/gatewaysvc"
	"github.com/llmworker/llmworker/internal/service/ingestsvc"
	"github.com/llmworker/llmworker/internal/service/servicetest"
	"github.com/llmworker/llmworker/internal/service/toolexecsvc"
	"github.com/llmworker/llmworker/internal/service/turnsvc"
	"github.com/llmworker/llmworker/pkg/agents"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/gateway"
	"github.com/llmworker/llmworker/pkg/natstest"
	"github.com/llmworker/llmworker/pkg/permissions"
	"github.com/llmworker/llmworker/pkg/provision"
)

// refusals collects the server's permission violations.
type refusals struct {
	mu    sync.Mutex
	lines []string
}

func (v *refusals) log(format string, args ...any) {
	if line := fmt.Sprintf(format, args...); strings.Contains(line, "Violation - ") {
		v.mu.Lock()
		v.lines = append(v.lines, line)
		v.mu.Unlock()
	}
}
func (v *refusals) Noticef(f string, a ...any) { v.log(f, a...) }
func (v *refusals) Warnf(f string, a ...any)   { v.log(f, a...) }
func (v *refusals) Fatalf(f string, a ...any)  { v.log(f, a...) }
func (v *refusals) Errorf(f string, a ...any)  { v.log(f, a...) }
func (v *refusals) Debugf(f string, a ...any)  { v.log(f, a...) }
func (v *refusals) Tracef(f string, a ...any)  { v.log(f, a...) }

// The gateway runs under the gateway identity of `llmworker
// permissions` on a nats-server that enforces it, beside the services
// under theirs: it verifies the streams, submits a turn, streams it,
// lists the session, resumes and replays, with not one refusal.
func TestUnderItsIdentity(t *testing.T) {
	pw := map[permissions.Role]string{}
	for _, u := range permissions.DefaultUsers() {
		pw[u.Role] = nuid.Next()
		t.Setenv(u.PasswordEnv, pw[u.Role])
	}
	conf := filepath.Join(t.TempDir(), "nats.conf")
	body := fmt.Sprintf("listen: \"127.0.0.1:-1\"\njetstream { store_dir: %q }\n%s", t.TempDir(), permissions.Config("", permissions.DefaultUsers()))
	if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	opts.NoSigs = true
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	v := &refusals{}
	srv.SetLogger(v, false, false)
	go srv.Start()
	if !srv.ReadyForConnections(5 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	t.Cleanup(srv.Shutdown)
	url := srv.ClientURL()
	user := func(r permissions.Role) string { return "llmw-" + string(r) }

	// Provision as the provisioner.
	pc, err := nats.Connect(url, nats.UserInfo(user(permissions.Provisioner), pw[permissions.Provisioner]))
	if err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(pc)
	if err := provision.Provision(natstest.Context(t), js, provision.Options{}); err != nil {
		t.Fatal(err)
	}
	// An agent the gateway serves over A2A.
	if _, _, err := agents.New(js).Put(natstest.Context(t), events.AgentDefinition{Name: "demo", Model: "replay:anthropic"}, agents.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	pc.Close()

	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	logs := map[string]*servicetest.SyncBuffer{}
	run := func(svc service.Service, r permissions.Role, args ...string) {
		out := &servicetest.SyncBuffer{}
		logs[svc.Name()] = out
		wg.Add(1)
		go func() {
			defer wg.Done()
			code := service.Main(ctx, svc, append([]string{"--nats-url", url, "--nats-user", user(r), "--provision-verify", "--drain-timeout", "5s", "--log-format", "text"}, args...),
				service.IO{Getenv: func(k string) string {
					if k == "NATS_PASSWORD" {
						return pw[r]
					}
					return ""
				}, Stdout: io.Discard, Stderr: out})
			if code != 0 && ctx.Err() == nil {
				t.Errorf("%s exited %d:\n%s", svc.Name(), code, out.String())
			}
		}()
	}
	t.Cleanup(func() {
		stop()
		wg.Wait()
	})
	run(&ingestsvc.Service{}, permissions.Ingest, "--replay")
	run(&toolexecsvc.Service{}, permissions.Toolexec, "--replay")
	run(&turnsvc.Service{}, permissions.Turn, "--default-tools", "*")
	run(&gatewaysvc.Service{}, permissions.Gateway, "--http", "127.0.0.1:0", "--chat-model", "replay:anthropic")
	re := regexp.MustCompile(`gateway serving"? url=(http://[0-9.:]+)`)
	var base string
	t.Cleanup(func() {
		if t.Failed() {
			for n, l := range logs {
				t.Logf("%s log:\n%s", n, l.String())
			}
			t.Logf("refused: %v", v.lines)
		}
	})
	natstest.EventuallyWithin(t, 30*time.Second, "services started", func() bool {
		m := re.FindStringSubmatch(logs["gateway"].String())
		if m != nil {
			base = m[1]
		}
		return m != nil && strings.Contains(logs["turn"].String(), "turn service started") && strings.Contains(logs["toolexec"].String(), "toolexec started")
	})

	c := &gateway.Client{URL: base}
	s, err := c.Chat(ctxT(t), &gateway.ChatRequest{ID: "ident-1", Messages: []gateway.UIMessage{userMsg("hi")}})
	if err != nil {
		t.Fatal(err)
	}
	parts, done := readAll(t, s, nil)
	s.Close()
	if !done || parts[len(parts)-1].Type != "finish" || text(parts, "text-delta") == "" {
		t.Fatalf("turn under identities: %v; refused: %v", types(parts), v.lines)
	}
	if _, err := c.Resume(ctxT(t), "ident-1"); !errors.Is(err, gateway.ErrNoActiveStream) {
		t.Fatalf("resume: %v", err)
	}
	hist, err := c.HTTPGet(ctxT(t), "/api/chat/ident-1/stream?turn="+parts[0].field("messageId"))
	if err != nil || !strings.HasSuffix(hist, "data: [DONE]\n\n") {
		t.Fatalf("history: %v %.200s", err, hist)
	}
	msgs, err := c.Messages(ctxT(t), "ident-1")
	if err != nil || len(msgs) != 2 || msgs[0].Role != "user" || msgs[1].ID != parts[0].field("messageId") {
		t.Fatalf("messages: %v %+v", err, msgs)
	}
	resp, err := c.HTTPGet(ctxT(t), "/api/sessions")
	if err != nil || !strings.Contains(resp, `"id":"ident-1"`) {
		t.Fatalf("sessions: %v %s", err, resp)
	}
	// A2A: the card and a task, read back.
	card, err := c.HTTPGet(ctxT(t), "/a2a/demo/.well-known/agent-card.json")
	if err != nil || !strings.Contains(card, `"name": "demo"`) {
		t.Fatalf("A2A card: %v %s", err, card)
	}
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"hi"}]}}}`,
		`{"jsonrpc":"2.0","id":2,"method":"ListTasks","params":{}}`,
	} {
		resp, err := http.Post(base+"/a2a/demo", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(b), "TASK_STATE_COMPLETED") {
			t.Fatalf("A2A %.40s: %s", body[30:], b)
		}
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.lines) > 0 {
		t.Fatalf("the server refused:\n%s\ngateway log:\n%s", strings.Join(v.lines, "\n"), logs["gateway"].String())
	}
}
