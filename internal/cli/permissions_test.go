package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/llmworker/llmworker/internal/service"
	"github.com/llmworker/llmworker/internal/service/hookbridgesvc"
	"github.com/llmworker/llmworker/internal/service/ingestsvc"
	"github.com/llmworker/llmworker/internal/service/toolexecsvc"
	"github.com/llmworker/llmworker/internal/service/turnsvc"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/ingest"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/mcp"
	"github.com/llmworker/llmworker/pkg/natstest"
	"github.com/llmworker/llmworker/pkg/permissions"
	"github.com/llmworker/llmworker/pkg/turn"
)

// violations collects what nats-server refuses, as it logs it.
type violations struct {
	mu    sync.Mutex
	lines []string
}

func (v *violations) log(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	if strings.Contains(line, "Violation - ") { // "Publish Violation - Subject …", "Subscription Violation - …"
		v.mu.Lock()
		v.lines = append(v.lines, line)
		v.mu.Unlock()
	}
}

func (v *violations) Noticef(f string, a ...any) { v.log(f, a...) }
func (v *violations) Warnf(f string, a ...any)   { v.log(f, a...) }
func (v *violations) Fatalf(f string, a ...any)  { v.log(f, a...) }
func (v *violations) Errorf(f string, a ...any)  { v.log(f, a...) }
func (v *violations) Debugf(f string, a ...any)  { v.log(f, a...) }
func (v *violations) Tracef(f string, a ...any)  { v.log(f, a...) }

func (v *violations) take() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := v.lines
	v.lines = nil
	return out
}

// Every service runs under its own identity from `llmworker permissions`
// on a nats-server that enforces it: after `llmworker provision` as the
// provisioner, a turn with tool calls, an approval hook, a pause and a
// resume completes, a cancel ends another turn, and a reader replays the
// events afterwards, with not one refusal. Then each forbidden act is
// refused by the server: toolexec publishing a worker event or a turn
// request, hookbridge a tool result, the reader anything of llmworker's,
// the submitter reading the state buckets or answering a hook.
func TestRolesOnTheBus(t *testing.T) {
	pw := map[permissions.Role]string{}
	for _, u := range permissions.DefaultUsers() {
		pw[u.Role] = nuid.Next()
		t.Setenv(u.PasswordEnv, pw[u.Role])
	}
	gen := runCLI(t, Env{}, "permissions")
	if gen.code != 0 {
		t.Fatalf("permissions: exit %d: %s", gen.code, gen.stderr)
	}
	conf := filepath.Join(t.TempDir(), "nats.conf")
	body := fmt.Sprintf("listen: \"127.0.0.1:-1\"\njetstream { store_dir: %q }\n%s", t.TempDir(), gen.stdout)
	if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(conf)
	if err != nil {
		t.Fatalf("nats-server refuses the generated configuration: %v\n%s", err, body)
	}
	opts.NoSigs = true
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	v := &violations{}
	srv.SetLogger(v, false, false)
	go srv.Start()
	if !srv.ReadyForConnections(5 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	t.Cleanup(srv.Shutdown)
	url := srv.ClientURL()
	user := func(r permissions.Role) string { return "llmw-" + string(r) }
	as := func(r permissions.Role) Env {
		return Env{Getenv: envOf("NATS_URL", url, "NATS_USER", user(r), "NATS_PASSWORD", pw[r])}
	}
	connect := func(r permissions.Role) (*nats.Conn, chan error) {
		errs := make(chan error, 16)
		nc, err := nats.Connect(url, nats.UserInfo(user(r), pw[r]), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			select {
			case errs <- err:
			default:
			}
		}))
		if err != nil {
			t.Fatalf("connect as %s: %v", r, err)
		}
		t.Cleanup(nc.Close)
		return nc, errs
	}

	if r := runCLI(t, as(permissions.Provisioner), "provision"); r.code != 0 {
		t.Fatalf("provision as %s: exit %d: %s", user(permissions.Provisioner), r.code, r.stderr)
	}
	// The operator writes the agent definitions.
	if r := runCLI(t, as(permissions.Provisioner), "agent", "put", filepath.Join("..", "..", "deploy", "agents.example.yaml")); r.code != 0 {
		t.Fatalf("agent put as %s: exit %d: %s", user(permissions.Provisioner), r.code, r.stderr)
	}

	// The services, each its own process in all but name.
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	logs := map[string]*syncBuffer{}
	var logsMu sync.Mutex
	run := func(svc service.Service, r permissions.Role, args ...string) *syncBuffer {
		out := &syncBuffer{}
		logsMu.Lock()
		if logs[svc.Name()] == nil {
			logs[svc.Name()] = out
		}
		logsMu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			code := service.Main(ctx, svc, append([]string{"--nats-url", url, "--nats-user", user(r), "--provision-verify", "--drain-timeout", "5s"}, args...),
				service.IO{Getenv: envOf("NATS_PASSWORD", pw[r]), Stdout: io.Discard, Stderr: out})
			if code != 0 && ctx.Err() == nil {
				t.Errorf("%s exited %d:\n%s", svc.Name(), code, out.String())
			}
		}()
		return out
	}
	t.Cleanup(func() {
		stop()
		wg.Wait()
	})
	// Ingest holds the model calls to a shared limit: its role reads and
	// writes LLMW_QUOTA on every call.
	limits := filepath.Join(t.TempDir(), "limits.yaml")
	if err := os.WriteFile(limits, []byte("limits: [{key: replay, concurrent: 4}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	run(&ingestsvc.Service{}, permissions.Ingest, "--replay", "--quota-config", limits)
	run(&toolexecsvc.Service{}, permissions.Toolexec, "--replay")
	run(&hookbridgesvc.Service{}, permissions.Hookbridge, "--config", hooksFile(t))
	run(&turnsvc.Service{}, permissions.Turn, "--default-tools", "*")

	submitter, _ := connect(permissions.Submitter)
	sc, err := turn.NewClient(submitter, turn.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	reader, _ := connect(permissions.Reader)
	rc, err := turn.NewClient(reader, turn.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s0 := events.NewSubjects("")
	follow := func(id, typ string) *events.Envelope {
		t.Helper()
		fctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		f, err := rc.Follow(fctx, events.NewSubjects("").EventsOfTurn(id))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Stop()
		var seen []string
		for {
			select {
			case <-fctx.Done():
				t.Fatalf("turn %s: no %s within 30s; saw %v; refused: %v\nlogs: %v", id, typ, seen, v.take(), logs)
			case it := <-f.C():
				if it.Err != nil {
					t.Fatal(it.Err)
				}
				seen = append(seen, it.Env.Type)
				if it.Env.Type == typ {
					return it.Env
				}
			}
		}
	}
	// The services are ready when the hook is registered and the tools
	// are in the catalog: a turn submitted before would run without them.
	natstest.EventuallyWithin(t, 30*time.Second, "services registered", func() bool {
		return strings.Contains(logs["hookbridge"].String(), "serving hook") && strings.Contains(logs["turn"].String(), "turn service started") &&
			strings.Contains(logs["toolexec"].String(), "toolexec started")
	})

	// A client role may read _INBOX.>, and so what arrives there: before
	// the services had inboxes of their own, that was the turn requests
	// the turn service fetched, the states and sessions it read and the
	// calls toolexec fetched. A sniffer sees none of them.
	sniffer, _ := connect(permissions.Submitter)
	var leaks []string
	var leaksMu sync.Mutex
	if _, err := sniffer.Subscribe("_INBOX.>", func(m *nats.Msg) {
		stream := m.Header.Get("Nats-Stream")
		if (strings.HasPrefix(m.Reply, "$JS.ACK.") && !strings.HasPrefix(m.Reply, "$JS.ACK."+events.StreamEvents+".")) ||
			(stream != "" && stream != events.StreamEvents) {
			leaksMu.Lock()
			leaks = append(leaks, fmt.Sprintf("%s (reply %s, stream %q)", m.Subject, m.Reply, stream))
			leaksMu.Unlock()
		}
	}); err != nil {
		t.Fatal(err)
	}
	if err := sniffer.Flush(); err != nil {
		t.Fatal(err)
	}

	// A turn that pauses at the approval hook, resumed by the submitter.
	id := nuid.Next()
	if err := sc.Submit(ctx, &events.TurnRequest{TurnID: id, Model: "replay:gemini", Messages: []events.Message{events.UserText("capital?")}}); err != nil {
		t.Fatal(err)
	}
	paused, err := events.DecodeData[events.TurnPaused](follow(id, events.TypeTurnPaused))
	if err != nil || len(paused.Pending) != 1 {
		t.Fatalf("paused %+v %v", paused, err)
	}
	if err := sc.Resume(ctx, &events.ResumeRequest{TurnID: id, Decisions: map[string]events.Decision{paused.Pending[0].ID: {Kind: events.DecisionApprove}}}); err != nil {
		t.Fatal(err)
	}
	follow(id, events.TypeTurnCompleted)
	// Another, cancelled while it waits for approval.
	id2 := nuid.Next()
	if err := sc.Submit(ctx, &events.TurnRequest{TurnID: id2, Model: "replay:gemini", Messages: []events.Message{events.UserText("capital?")}}); err != nil {
		t.Fatal(err)
	}
	follow(id2, events.TypeTurnPaused)
	if err := sc.Cancel(ctx, id2); err != nil {
		t.Fatal(err)
	}
	follow(id2, events.TypeTurnAborted)
	// A turn of an agent: the turn service reads its definition (whose
	// tools the approval hook pauses).
	idAgent := nuid.Next()
	if err := sc.Submit(ctx, &events.TurnRequest{TurnID: idAgent, Agent: "geo", Model: "replay:gemini", Messages: []events.Message{events.UserText("capital?")}}); err != nil {
		t.Fatal(err)
	}
	follow(idAgent, events.TypeTurnPaused)
	if err := sc.Cancel(ctx, idAgent); err != nil {
		t.Fatal(err)
	}
	follow(idAgent, events.TypeTurnAborted)
	// A late reader replays the first turn from the stream.
	follow(id, events.TypeTurnStarted)

	// A completion request larger than a message (1 MiB here): the turn
	// role stores it in LLMW_REQUESTS, ingest's reads it, and the turn
	// role deletes it once ingest answered.
	turnNC, err := nats.Connect(url, nats.UserInfo(user(permissions.Turn), pw[permissions.Turn]),
		nats.CustomInboxPrefix(permissions.InboxPrefix(permissions.Turn, "")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(turnNC.Close)
	big := ingest.NewClient(turnNC, ingest.ClientOptions{})
	t.Cleanup(func() { _ = big.Close() })
	long := events.UserText(strings.Repeat("a long transcript ", int(turnNC.MaxPayload())/9))
	bctx, bcancel := context.WithTimeout(ctx, 30*time.Second)
	bs, err := big.Stream(bctx, &llm.Request{Model: "replay:gemini", Messages: []events.Message{long}})
	if err != nil {
		bcancel()
		t.Fatalf("a request of %d bytes under the turn role: %v; refused: %v", len(long.Text()), err, v.take())
	}
	for bs.Next() {
	}
	_ = bs.Close()
	bcancel()
	if obs, err := jetstream.New(turnNC); err == nil {
		if store, err := obs.ObjectStore(ctx, events.BucketRequests); err != nil {
			t.Errorf("turn role: %s: %v", events.BucketRequests, err)
		} else if left, err := store.List(ctx); !errors.Is(err, jetstream.ErrNoObjectsFound) {
			t.Errorf("%s holds %d objects after ingest answered (%v), want none", events.BucketRequests, len(left), err)
		}
	}

	// The MCP gateway under its identity: a client lists the catalog and
	// calls get_capital, which the approval hook pauses until the
	// submitter resumes it.
	mcpIn, mcpInW := io.Pipe()
	mcpOutR, mcpOut := io.Pipe()
	mcpLog := &syncBuffer{}
	mcpDone := make(chan int, 1)
	go func() {
		mcpDone <- Main(ctx, []string{"mcp", "--pause-timeout", "30s"}, Env{Stdin: mcpIn, Stdout: mcpOut, Stderr: mcpLog,
			Getenv: envOf("NATS_URL", url, "NATS_USER", user(permissions.MCP), "NATS_PASSWORD", pw[permissions.MCP])})
		_ = mcpOut.Close()
	}()
	mcs, err := sdk.NewClient(&sdk.Implementation{Name: "roles", Version: "1"}, nil).Connect(ctx, &sdk.IOTransport{Reader: mcpOutR, Writer: mcpInW}, nil)
	if err != nil {
		t.Fatalf("mcp as %s: %v\n%s", user(permissions.MCP), err, mcpLog.String())
	}
	pauses, err := reader.SubscribeSync(s0.EventsAll())
	if err != nil {
		t.Fatal(err)
	}
	// The pause comes as a core message: the subscription must be at the
	// server before the call is made, not merely queued on the connection.
	if err := reader.Flush(); err != nil {
		t.Fatal(err)
	}
	capital := make(chan *sdk.CallToolResult, 1)
	go func() {
		r, err := mcs.CallTool(ctx, &sdk.CallToolParams{Name: "get_capital", Arguments: map[string]any{"country": "France"}})
		if err != nil {
			r = &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: err.Error()}}}
		}
		capital <- r
	}()
	for {
		m, err := pauses.NextMsg(30 * time.Second)
		if err != nil {
			t.Fatalf("no pause of the MCP call: %v; refused: %v\n%s", err, v.take(), mcpLog.String())
		}
		env, err := events.DecodeEnvelope(m.Header, m.Data)
		if err != nil || env.Type != events.TypeTurnPaused || !mcp.PausedByGateway(env.Source) {
			continue
		}
		p, _ := events.DecodeData[events.TurnPaused](env)
		if err := mcp.Resume(ctx, submitter, "", "/roles", events.ResumeRequest{TurnID: env.TurnID,
			Decisions: map[string]events.Decision{p.Pending[0].ID: {Kind: events.DecisionApprove}}}, 10*time.Second); err != nil {
			t.Fatalf("the submitter's resume of the MCP call: %v; refused: %v", err, v.take())
		}
		break
	}
	_ = pauses.Unsubscribe()
	if r := <-capital; r.IsError || !strings.Contains(resultText(r), "Paris") {
		t.Fatalf("get_capital through the MCP gateway: error=%v %q; refused: %v\n%s", r.IsError, resultText(r), v.take(), mcpLog.String())
	}
	_ = mcs.Close()
	_ = mcpInW.Close()
	if c := <-mcpDone; c != 0 {
		t.Fatalf("mcp exited %d:\n%s", c, mcpLog.String())
	}
	if got := v.take(); len(got) > 0 {
		t.Fatalf("the server refused what a role needs:\n%s", strings.Join(got, "\n"))
	}

	leaksMu.Lock()
	if len(leaks) > 0 {
		t.Errorf("a client role's _INBOX.> received %d of the services' replies, e.g. %s", len(leaks), leaks[0])
	}
	leaksMu.Unlock()

	// The forbidden acts.
	s := events.NewSubjects("")
	toolexec, _ := connect(permissions.Toolexec)
	hookbridge, _ := connect(permissions.Hookbridge)
	refused := func(who string, nc *nats.Conn, subject string) {
		t.Helper()
		if err := nc.Publish(subject, []byte("{}")); err != nil {
			t.Fatal(err)
		}
		_ = nc.Flush()
		natstest.EventuallyWithin(t, 5*time.Second, who+" refused "+subject, func() bool {
			for _, l := range v.take() {
				if strings.Contains(l, subject) {
					return true
				}
			}
			return false
		})
	}
	refused("toolexec", toolexec, s.Emit("", id, events.ChannelTurn))
	refused("toolexec", toolexec, s.TurnSubmit())
	// A host's results reach the turn through the stream only.
	refused("toolexec", toolexec, s.ToolStored(id, "c1"))
	refused("hookbridge", hookbridge, s.ToolResult(id, "c1"))
	refused("reader", reader, s.TurnSubmit())
	refused("reader", reader, s.TurnCancel(id))
	// Only the operator writes agent definitions.
	turnConn, _ := connect(permissions.Turn)
	refused("turn", turnConn, "$KV."+events.BucketAgents+".geo")
	refused("submitter", submitter, "$KV."+events.BucketAgents+".geo")
	// The submitter reads no turn state and answers no hook.
	js, err := jetstream.New(submitter)
	if err != nil {
		t.Fatal(err)
	}
	kctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if _, err := js.KeyValue(kctx, events.BucketTurnState); err == nil {
		t.Error("the submitter opened the turn state bucket")
	}
	if _, err := submitter.Subscribe(s.Hook("approve-capital"), func(*nats.Msg) {}); err != nil {
		t.Fatal(err)
	}
	_ = submitter.Flush()
	subscriptionRefused(t, v, "submitter", s.Hook("approve-capital"))

	// A refusal a service meets at run time is logged as a permissions
	// error, and the service goes on: a hook registered on a subject
	// outside P.hook.> (which the roles do not cover, docs/security.md)
	// is refused to hookbridge's subscription and to the turn service's
	// requests; its failure policy (fail_open) lets the turn complete.
	audit := filepath.Join(t.TempDir(), "audit.yaml")
	if err := os.WriteFile(audit, []byte("hooks:\n  - name: audit\n    subject: audit.hooks.inject\n    timeout: 500ms\n    failure: fail_open\n"+
		"    builtin:\n      type: inject_message\n      text: audited\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	hb2 := run(&hookbridgesvc.Service{}, permissions.Hookbridge, "--config", audit, "--instance", "hookbridge-audit")
	natstest.EventuallyWithin(t, 30*time.Second, "the audit hook registered, its subscription refused", func() bool {
		l := hb2.String()
		return strings.Contains(l, "serving hook") && strings.Contains(l, "NATS error") && strings.Contains(l, "Permissions Violation")
	})
	id3 := nuid.Next()
	if err := sc.Submit(ctx, &events.TurnRequest{TurnID: id3, Model: "replay:gemini", Messages: []events.Message{events.UserText("capital?")}}); err != nil {
		t.Fatal(err)
	}
	paused3, err := events.DecodeData[events.TurnPaused](follow(id3, events.TypeTurnPaused))
	if err != nil || len(paused3.Pending) != 1 {
		t.Fatalf("paused %+v %v", paused3, err)
	}
	if err := sc.Resume(ctx, &events.ResumeRequest{TurnID: id3, Decisions: map[string]events.Decision{paused3.Pending[0].ID: {Kind: events.DecisionApprove}}}); err != nil {
		t.Fatal(err)
	}
	follow(id3, events.TypeTurnCompleted)
	natstest.EventuallyWithin(t, 10*time.Second, "the turn service logs its refused hook request", func() bool {
		l := logs["turn"].String()
		return strings.Contains(l, "NATS error") && strings.Contains(l, "Permissions Violation") && strings.Contains(l, "audit.hooks.inject")
	})
	// No role reads another's replies: the turn service's inboxes carry
	// the states its KV gets return and the events it reads back, and
	// the reader, allowed _INBOX.> for its own, may not subscribe to them.
	turnInbox := permissions.InboxPrefix(permissions.Turn, "") + ".>"
	for who, nc := range map[string]*nats.Conn{"reader": reader, "toolexec": toolexec} {
		if _, err := nc.Subscribe(turnInbox, func(*nats.Msg) {}); err != nil {
			t.Fatal(err)
		}
		_ = nc.Flush()
		subscriptionRefused(t, v, who, turnInbox)
	}
}

// subscriptionRefused waits until the server logs its refusal of a
// subscription to subject.
func subscriptionRefused(t *testing.T, v *violations, who, subject string) {
	t.Helper()
	natstest.EventuallyWithin(t, 5*time.Second, who+" refused a subscription to "+subject, func() bool {
		for _, l := range v.take() {
			if strings.Contains(l, "Subscription Violation") && strings.Contains(l, subject) {
				return true
			}
		}
		return false
	})
}

// The server configuration shipped in deploy/ (which compose's secure
// profile runs) is what `llmworker permissions` prints for the default
// prefix: it cannot drift from the subjects the code uses.
func TestShippedAuthConfIsGenerated(t *testing.T) {
	gen := runCLI(t, Env{}, "permissions")
	if gen.code != 0 {
		t.Fatalf("permissions: exit %d: %s", gen.code, gen.stderr)
	}
	shipped, err := os.ReadFile(filepath.Join("..", "..", "deploy", "auth.conf"))
	if err != nil {
		t.Fatal(err)
	}
	if string(shipped) != gen.stdout {
		t.Fatal("deploy/auth.conf differs from `llmworker permissions`: regenerate it with\n\tgo run ./cmd/llmworker permissions > deploy/auth.conf")
	}
}
