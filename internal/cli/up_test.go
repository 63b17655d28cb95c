package cli

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"

	"github.com/llmworker/llmworker/internal/replay"
	"github.com/llmworker/llmworker/pkg/events"
)

// upProc is an `llmworker up` running in-process.
type upProc struct {
	st   *Stack
	out  *syncBuffer
	intr chan os.Signal
	done chan int
}

// startUp runs `up` with args until stop; it fails the test if up exits
// before it serves.
func startUp(t *testing.T, getenv func(string) string, args ...string) *upProc {
	t.Helper()
	u := &upProc{out: &syncBuffer{}, intr: make(chan os.Signal, 1), done: make(chan int, 1)}
	started := make(chan *Stack, 1)
	go func() {
		// The gateway on a random port: tests run side by side.
		u.done <- Main(context.Background(), append([]string{"up", "--http", "127.0.0.1:0"}, args...),
			Env{Stdout: u.out, Stderr: u.out, Getenv: getenv, Interrupt: u.intr, Started: func(s *Stack) { started <- s }})
	}()
	select {
	case u.st = <-started:
	case code := <-u.done:
		t.Fatalf("up exited %d:\n%s", code, u.out.String())
	}
	return u
}

// stop sends Ctrl-C and waits for up to exit 0.
func (u *upProc) stop(t *testing.T) {
	t.Helper()
	u.intr <- os.Interrupt
	if code := <-u.done; code != 0 {
		t.Fatalf("up exited %d:\n%s", code, u.out.String())
	}
}

func TestUp(t *testing.T) {
	state := t.TempDir()
	u := startUp(t, envOf("XDG_STATE_HOME", state), "--listen", "127.0.0.1:0", "--replay", "--replay-pace", "0", "--log-level", "error")
	// A client chats with the running system.
	r := runCLI(t, Env{Getenv: envOf("NATS_URL", u.st.URL)}, "chat", "--model", "replay:openai", "hi")
	if r.code != 0 {
		t.Fatalf("chat against up: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	u.stop(t)
	s := u.out.String()
	// Without a key the hint must name a model that runs: the replay.
	hint := "NATS_URL=" + u.st.URL + " llmworker chat --model " + replay.Scenarios()[0].ModelString()
	for _, want := range []string{"llmworker is up: ingest, toolexec, turn", u.st.URL, hint,
		"store", filepath.Join(state, "llmworker", "nats") + " (kept",
		"llmw.turn.submit", "llmw.turn.cancel.<turn_id>", "llmw.events.<session|_>.<turn_id>.<channel>", replay.Label, "draining"} {
		if !strings.Contains(s, want) {
			t.Errorf("up output lacks %q:\n%s", want, s)
		}
	}
}

// TestUpBusyPort: a taken port is an error at once that names the address
// and the flag to change it, not a readiness timeout.
func TestUpBusyPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	r := runCLI(t, Env{Getenv: envOf()}, "up", "--listen", ln.Addr().String(), "--temp-store")
	if r.code != 2 {
		t.Fatalf("exit %d, want 2 (usage):\n%s", r.code, r.stderr)
	}
	for _, want := range []string{"address already in use", ln.Addr().String(), "--listen"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("error lacks %q: %s", want, r.stderr)
		}
	}
}

// TestUpStoreLocked: two `up` on one store directory would corrupt it; the
// second is refused, naming the directory.
func TestUpStoreLocked(t *testing.T) {
	dir := t.TempDir()
	u := startUp(t, envOf(), "--listen", "127.0.0.1:0", "--store-dir", dir, "--replay", "--log-level", "error")
	r := runCLI(t, Env{Getenv: envOf()}, "up", "--listen", "127.0.0.1:0", "--store-dir", dir, "--replay")
	if r.code == 0 || !strings.Contains(r.stderr, "in use by another process") || !strings.Contains(r.stderr, dir) {
		t.Errorf("second up on %s: exit %d: %s", dir, r.code, r.stderr)
	}
	u.stop(t)
}

// hooksFile writes a hookbridge config that pauses every get_capital call.
func hooksFile(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "hooks.yaml")
	yaml := "hooks:\n  - name: approve-capital\n    builtin:\n      type: require_approval\n      pattern: \"^get_capital$\"\n      reason: capital lookups need approval\n"
	if err := os.WriteFile(p, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestUpRestartKeepsTurns: by default `up` keeps its store in the user's
// state directory, so a turn paused when up stops is resumed after the
// next start and completes.
func TestUpRestartKeepsTurns(t *testing.T) {
	getenv := envOf("XDG_STATE_HOME", t.TempDir())
	hooks := hooksFile(t)
	args := []string{"--listen", "127.0.0.1:0", "--replay", "--replay-pace", "0", "--hooks", hooks, "--log-level", "error"}
	u := startUp(t, getenv, args...)
	id := nuid.Next()
	submit(t, u.st, events.TurnRequest{TurnID: id, Model: "replay:openai-responses"})
	waitFor(t, u.st, id, events.TypeTurnPaused)
	u.stop(t)

	u = startUp(t, getenv, args...)
	defer u.stop(t)
	if r := runCLI(t, Env{Getenv: envOf("NATS_URL", u.st.URL)}, "turn", "resume", id, "--approve-all"); r.code != 0 {
		t.Fatalf("resume after the restart: exit %d: %s", r.code, r.stderr)
	}
	waitFor(t, u.st, id, events.TypeTurnCompleted)
}

// TestUpTempStoreEndsTurns: with --temp-store nothing survives the exit,
// so a client waiting on a paused turn gets llmw.turn.aborted before up
// is gone, instead of silence.
func TestUpTempStoreEndsTurns(t *testing.T) {
	// --advertise-url: the banner names the URL clients use (a
	// container's published port), not the server's own.
	u := startUp(t, envOf(), "--listen", "127.0.0.1:0", "--temp-store", "--advertise-url", "nats://127.0.0.1:4999", "--replay", "--replay-pace", "0", "--hooks", hooksFile(t), "--log-level", "error")
	for _, want := range []string{"temporary: removed on exit", "NATS_URL=nats://127.0.0.1:4999 llmworker chat"} {
		if !strings.Contains(u.out.String(), want) {
			t.Errorf("banner lacks %q:\n%s", want, u.out.String())
		}
	}
	id := nuid.Next()
	submit(t, u.st, events.TurnRequest{TurnID: id, Model: "replay:openai-responses"})
	waitFor(t, u.st, id, events.TypeTurnPaused)
	// A client of its own, as a UI would be.
	nc, err := nats.Connect(u.st.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	got := make(chan *nats.Msg, 64)
	sub, err := nc.ChanSubscribe(events.NewSubjects(u.st.Prefix).EventsOfTurn(id), got)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	u.stop(t)
	// Delivered before the server went down; the read may lag behind.
	timeout := time.After(10 * time.Second)
	for {
		select {
		case m := <-got:
			e, err := events.DecodeEnvelope(m.Header, m.Data)
			if err != nil || e.Type != events.TypeTurnAborted {
				continue
			}
			d, _ := events.DecodeData[events.TurnEnded](e)
			if !strings.Contains(d.Reason, "temporary") {
				t.Errorf("reason %q does not say why", d.Reason)
			}
			return
		case <-timeout:
			t.Fatal("up exited without ending the paused turn")
		}
	}
}

// TestProvisionCommand: `llmworker provision` creates every stream and
// bucket and lists them; a replica count JetStream cannot have is a usage
// error. (R3 runs on the e2e suite's three-node cluster.)
func TestProvisionCommand(t *testing.T) {
	u := startUp(t, envOf(), "--listen", "127.0.0.1:0", "--temp-store", "--services", "ingest", "--log-level", "error")
	defer u.stop(t)
	r := runCLI(t, Env{Getenv: envOf("NATS_URL", u.st.URL)}, "provision", "--replicas", "1", "--media-max-age", "48h")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for _, want := range []string{events.StreamEvents, events.StreamTurns, events.StreamToolCalls, events.BucketTurnState + " (KV)", events.BucketHooks + " (KV)",
		events.BucketMedia + " (objects, max age 48h0m0s)"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %s:\n%s", want, r.stdout)
		}
	}
	if r := runCLI(t, Env{Getenv: envOf("NATS_URL", u.st.URL)}, "provision", "--replicas", "7"); r.code != 2 {
		t.Errorf("--replicas 7: exit %d, want 2", r.code)
	}
}
