//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/llmworker/llmworker/internal/replay"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/permissions"
)

// composeStack is deploy/compose.yaml brought up with docker-compose (v1,
// the tool this machine has; the file is also valid for the v2 plugin)
// from the images deploy/build-images.sh builds: the shipped artefacts,
// not the e2e test binaries.
type composeStack struct {
	*cluster
	project string
	env     []string
	tag     string
	files   []string // compose files of deploy/, compose.yaml first
	url     string   // of the stack's NATS server, from the host
}

// compose runs docker-compose for the stack's project.
func (s *composeStack) compose(ctx context.Context, args ...string) (string, error) {
	var files []string
	for _, f := range s.files {
		files = append(files, "-f", filepath.Join("..", "..", "deploy", f))
	}
	cmd := exec.CommandContext(ctx, "docker-compose", append(append([]string{"-p", s.project}, files...), args...)...)
	cmd.Env = append(os.Environ(), s.env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// freePort returns a TCP port nothing listens on right now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// composeOpts are the variations of a compose stack.
type composeOpts struct {
	// toolDelay is how long the demo tools take.
	toolDelay time.Duration
	// overlay is a compose file of deploy/ applied over compose.yaml.
	overlay string
	// env is more environment for docker-compose (the overlay's
	// variables).
	env []string
	// connect are the options of the test's connection; with them the
	// stack is not waited for through $SRV.PING, which needs the rights
	// of a service.
	connect []nats.Option
}

// composeBuilt is the one build of the shipped images that every compose
// test of a run uses: the images depend on the sources only, and
// building them is most of a stack's start.
var composeBuilt struct {
	once sync.Once
	tag  string
	err  error
}

// composeImages builds the shipped images with deploy/build-images.sh once
// per run (tagged compose<time>, registry llmw-e2e) and returns their tag.
func composeImages() (string, error) {
	composeBuilt.once.Do(func() {
		tag := fmt.Sprintf("compose%d", time.Now().UnixNano())
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		build := exec.CommandContext(ctx, "sh", filepath.Join("..", "..", "deploy", "build-images.sh"))
		build.Env = append(os.Environ(), "TAG="+tag, "REGISTRY=llmw-e2e")
		if out, err := build.CombinedOutput(); err != nil {
			composeBuilt.err = fmt.Errorf("deploy/build-images.sh: %w\n%s", err, out)
			return
		}
		composeBuilt.tag = tag
	})
	return composeBuilt.tag, composeBuilt.err
}

// removeComposeImages removes the images composeImages built; TestMain
// calls it after the tests.
func removeComposeImages() {
	if composeBuilt.tag == "" {
		return
	}
	for _, b := range []string{"llmworker", "ingest", "turn", "toolexec", "hookbridge", "gateway", "nats-server"} {
		_ = exec.Command("docker", "rmi", "-f", "llmw-e2e/"+b+":"+composeBuilt.tag).Run()
	}
}

// startCompose builds the shipped images and brings the compose stack up
// with toolexec scaled to three replicas whose demo tools take toolDelay.
func startCompose(t *testing.T, toolDelay time.Duration) *composeStack {
	t.Helper()
	return startComposeWith(t, composeOpts{toolDelay: toolDelay})
}

func startComposeWith(t *testing.T, o composeOpts) *composeStack {
	t.Helper()
	toolDelay := o.toolDelay
	requireDocker(t)
	if _, err := exec.LookPath("docker-compose"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("docker-compose is not installed: .ci/run installs Debian's docker-compose")
		}
		t.Skip("docker-compose is not installed")
	}
	tag, err := composeImages()
	if err != nil {
		t.Fatal(err)
	}
	port, monitor := freePort(t), freePort(t)
	s := &composeStack{tag: tag, project: "llmwc" + strconv.FormatInt(time.Now().UnixNano()%1e9, 10), env: []string{
		"TAG=" + tag, "REGISTRY=llmw-e2e", "LLMW_NATS_PORT=" + strconv.Itoa(port), "LLMW_NATS_MONITOR_PORT=" + strconv.Itoa(monitor),
		"LLMW_REPLAY_DELAY=" + toolDelay.String(), "LLMW_TOOL_ACK_WAIT=3s", "LLMW_TOOLEXEC_LOG_LEVEL=debug",
	}, files: []string{"compose.yaml"}}
	s.env = append(s.env, o.env...)
	if o.overlay != "" {
		s.files = append(s.files, o.overlay)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if out, err := s.compose(ctx, "down", "-v", "--remove-orphans"); err != nil {
			t.Logf("compose down: %v\n%s", err, out)
		}
	})
	if out, err := s.compose(ctx, "up", "-d", "--scale", "toolexec=3"); err != nil {
		t.Fatalf("compose up: %v\n%s", err, out)
	}
	s.url = fmt.Sprintf("nats://127.0.0.1:%d", port)
	nc, err := nats.Connect(s.url, append([]nats.Option{nats.MaxReconnects(-1), nats.RetryOnFailedConnect(true)}, o.connect...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	s.cluster = &cluster{t: t, nc: nc, js: js, subj: events.NewSubjects(""), start: time.Now()}
	if o.connect != nil {
		return s
	}
	s.eventually(2*time.Minute, "three toolexec replicas and ingest serving", func() (bool, string) {
		n, err := s.pingCount("llmw-toolexec")
		if err != nil || n < 3 {
			return false, fmt.Sprintf("%d toolexec replicas answer (%v)", n, err)
		}
		if n, err := s.pingCount("llmw-ingest"); err != nil || n < 1 {
			return false, fmt.Sprintf("ingest: %d (%v)", n, err)
		}
		if n, err := s.pingCount("llmw-turn"); err != nil || n < 1 {
			return false, fmt.Sprintf("turn: %d (%v)", n, err)
		}
		return true, ""
	})
	return s
}

// pingCount counts the instances of a micro service that answer
// $SRV.PING.<name>.
func (s *composeStack) pingCount(name string) (int, error) {
	inbox := s.nc.NewRespInbox()
	sub, err := s.nc.SubscribeSync(inbox)
	if err != nil {
		return 0, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := s.nc.PublishRequest("$SRV.PING."+name, inbox, nil); err != nil {
		return 0, err
	}
	n := 0
	for {
		if _, err := sub.NextMsg(300 * time.Millisecond); err != nil {
			return n, nil
		}
		n++
	}
}

// toolexecs returns the container ids of the toolexec replicas.
func (s *composeStack) toolexecs() []string {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := s.compose(ctx, "ps", "-q", "toolexec")
	if err != nil {
		s.t.Fatalf("compose ps: %v\n%s", err, out)
	}
	return strings.Fields(out)
}

// runner returns the one of the toolexec containers ctrs that logged the
// start of the call of turnID ("tool call started", debug level), or "".
func (s *composeStack) runner(ctrs []string, turnID string) string {
	for _, id := range ctrs {
		out, _ := exec.Command("docker", "logs", id).CombinedOutput()
		sc := bufio.NewScanner(strings.NewReader(string(out)))
		for sc.Scan() {
			var rec map[string]any
			if json.Unmarshal(sc.Bytes(), &rec) == nil && rec["msg"] == "tool call started" && rec["turn_id"] == turnID {
				return id
			}
		}
	}
	return ""
}

// TestComposeTurns: the shipped compose file with toolexec scaled to 3
// runs 20 turns with tool calls through the containers: every turn
// completes with exactly one result per call, and the calls are spread
// over more than one toolexec replica. Then the replica running a call is
// killed: the call is redelivered to another replica and answered once.
func TestComposeTurns(t *testing.T) {
	t.Parallel()
	s := startCompose(t, 3*time.Second)
	// The images report the version build-images.sh stamped (TAG, as a
	// SemVer pre-release since it is not a version).
	for _, svc := range []string{"llmw-ingest", "llmw-turn", "llmw-toolexec"} {
		m, err := s.nc.Request("$SRV.INFO."+svc, nil, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var info struct {
			Version string `json:"version"`
		}
		if err := json.Unmarshal(m.Data, &info); err != nil || info.Version != "0.0.0-"+s.tag {
			t.Errorf("%s reports version %q (%v), want 0.0.0-%s", svc, info.Version, err, s.tag)
		}
	}
	names := replay.Names()
	var ids []string
	var fs []*follower
	for i := range 20 {
		ids = append(ids, fmt.Sprintf("compose-%d", i))
		fs = append(fs, s.follow(ids[i]))
	}
	for i, id := range ids {
		s.submit(id, names[i%len(names)])
	}
	calls := 0
	for i, f := range fs {
		done := f.completed(3 * time.Minute)
		for _, call := range s.checkTranscript(ids[i], names[i%len(names)], done) {
			calls++
			if n := s.toolResults(ids[i])[call]; n != 1 {
				t.Errorf("turn %s call %s: %d results in LLMW_TOOLRESULTS, want 1", ids[i], call, n)
			}
		}
	}
	if calls < 20 {
		t.Fatalf("%d tool calls in 20 turns", calls)
	}
	spread := map[string]int{}
	for _, id := range s.toolexecs() {
		out, _ := exec.Command("docker", "logs", id).CombinedOutput()
		spread[id] = strings.Count(string(out), `"msg":"tool call started"`)
	}
	busy := 0
	for _, n := range spread {
		if n > 0 {
			busy++
		}
	}
	if busy < 2 {
		t.Errorf("calls per toolexec replica %v: want them spread over more than one", spread)
	}
	t.Logf("%d turns, %d calls, calls per toolexec replica %v", len(ids), calls, spread)
	if bad := s.checkHistory(ids); len(bad) > 0 {
		t.Errorf("history:\n%s", strings.Join(bad, "\n"))
	}

	// Kill the replica running a call (SIGKILL, no drain). The kill must
	// land while the call runs: on a loaded machine the replica may have
	// answered it before the test saw it start (its log says so), and then
	// nothing is redelivered; the scenario is tried again with a new turn.
	// The demo tools take 3 s and the test reads only the replicas' logs
	// while it waits for the call, but reading three logs through docker
	// can take that long on a busy machine, so it has six tries.
	for attempt := 1; ; attempt++ {
		id := "compose-kill-" + strconv.Itoa(attempt)
		victim, killed, early := s.killMidCall(t, id)
		if early && attempt < 6 {
			t.Logf("attempt %d: %.12s answered the call of %s before the kill; again", attempt, victim, id)
			// Each try kills a replica: without starting it again the
			// third would leave no replica to redeliver the call to.
			s.revive(t, victim)
			continue
		}
		s.requireRedelivered(t, id, victim, killed)
		return
	}
}

// revive starts a killed toolexec replica again (docker start; nothing to
// do when its restart policy did) and waits until three replicas serve.
func (s *composeStack) revive(t *testing.T, ctr string) {
	t.Helper()
	if out, err := exec.Command("docker", "start", ctr).CombinedOutput(); err != nil {
		t.Fatalf("docker start %s: %v\n%s", ctr, err, out)
	}
	s.eventually(2*time.Minute, "three toolexec replicas serving again", func() (bool, string) {
		n, err := s.pingCount("llmw-toolexec")
		return err == nil && n >= 3, fmt.Sprintf("%d toolexec replicas answer (%v)", n, err)
	})
}

// killMidCall submits a turn, kills the toolexec replica that starts its
// call and says whether that replica had answered the call already.
func (s *composeStack) killMidCall(t *testing.T, id string) (victim string, killed time.Time, early bool) {
	t.Helper()
	ctrs := s.toolexecs()
	f := s.follow(id)
	s.submit(id, "anthropic")
	s.eventually(time.Minute, "a toolexec replica runs the call", func() (bool, string) {
		victim = s.runner(ctrs, id)
		return victim != "", "no replica logged the call yet"
	})
	if out, err := exec.Command("docker", "kill", victim).CombinedOutput(); err != nil {
		t.Fatalf("docker kill %s: %v\n%s", victim, err, out)
	}
	killed = time.Now()
	done := f.completed(3 * time.Minute)
	callIDs := s.checkTranscript(id, "anthropic", done)
	if len(callIDs) != 1 {
		t.Fatalf("calls %v, want one", callIDs)
	}
	if n := s.toolResults(id)[callIDs[0]]; n != 1 {
		t.Errorf("%d results for the call, want 1", n)
	}
	out, _ := exec.Command("docker", "logs", victim).CombinedOutput()
	return victim, killed, answeredTurn(string(out), id)
}

// answeredTurn says whether a replica's log has "tool call answered" for
// the turn.
func answeredTurn(logs, turnID string) bool {
	sc := bufio.NewScanner(strings.NewReader(logs))
	for sc.Scan() {
		var rec map[string]any
		if json.Unmarshal(sc.Bytes(), &rec) == nil && rec["msg"] == "tool call answered" && rec["turn_id"] == turnID {
			return true
		}
	}
	return false
}

// requireRedelivered checks that a replica other than the killed one ran
// the call, and the turn's history.
func (s *composeStack) requireRedelivered(t *testing.T, id, victim string, killed time.Time) {
	t.Helper()
	var by string
	for _, other := range s.toolexecs() {
		if other == victim {
			continue
		}
		out, _ := exec.Command("docker", "logs", other).CombinedOutput()
		if strings.Contains(string(out), `"turn_id":"`+id+`"`) {
			by = other
		}
	}
	if by == "" {
		t.Errorf("no other replica ran the call after %s was killed", victim)
	}
	t.Logf("call redelivered from %.12s to %.12s; turn completed %s after the kill", victim, by, time.Since(killed).Round(time.Millisecond))
	if bad := s.checkHistory([]string{id}); len(bad) > 0 {
		t.Errorf("history:\n%s", strings.Join(bad, "\n"))
	}
}

// TestComposeWithIdentities: deploy/compose.secure.yaml over the shipped
// compose file. nats-server enforces deploy/auth.conf, the provision
// service makes the streams and buckets as llmw-provision, and every
// service runs as its own role with --provision-verify. Turns with tool
// calls complete for a client that submits as llmw-submitter and follows
// as llmw-reader; the server refuses nothing the services do, and refuses
// the reader's submit.
func TestComposeWithIdentities(t *testing.T) {
	t.Parallel()
	var env []string
	pw := map[permissions.Role]string{}
	for _, u := range permissions.DefaultUsers() {
		pw[u.Role] = nuid.Next()
		env = append(env, u.PasswordEnv+"="+pw[u.Role])
	}
	s := startComposeWith(t, composeOpts{overlay: "compose.secure.yaml", env: env,
		connect: []nats.Option{nats.UserInfo(user(permissions.Submitter), pw[permissions.Submitter])}})
	// The reader's forbidden submit below comes back as an asynchronous
	// error; the server's log is what the test reads.
	quiet := nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {})
	rnc, err := nats.Connect(s.url, nats.UserInfo(user(permissions.Reader), pw[permissions.Reader]), nats.MaxReconnects(-1), quiet)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rnc.Close)
	rjs, err := jetstream.New(rnc)
	if err != nil {
		t.Fatal(err)
	}
	reader := &cluster{t: t, nc: rnc, js: rjs, subj: s.subj, start: s.start}
	// Neither client role may ping the services ($SRV.>) or read the
	// catalog: their logs say when they run (after the provision service,
	// since --provision-verify makes them restart until then), toolexec's
	// once its tools are in the catalog.
	s.eventually(2*time.Minute, "the services started under their identities", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for svc, line := range map[string]string{"ingest": "ingest started", "toolexec": "toolexec started", "turn": "turn service started"} {
			out, err := s.compose(ctx, "logs", "--no-color", svc)
			if err != nil || !strings.Contains(out, line) {
				return false, fmt.Sprintf("%s: %v\n%s", svc, err, tail(out, 2000))
			}
		}
		return true, ""
	})

	names := replay.Names()
	var fs []*follower
	for i, sc := range names {
		id := fmt.Sprintf("secure-%d", i)
		// Submitted first: the reader's consumer needs LLMW_EVENTS, which
		// exists once the provision service ran, and the submit retries
		// until then. The follower reads the turn from its start.
		s.submit(id, sc)
		fs = append(fs, reader.follow(id))
	}
	for i, f := range fs {
		done := f.completed(3 * time.Minute)
		sc, err := replay.Lookup(names[i])
		if err != nil {
			t.Fatal(err)
		}
		if got := len(f.of(events.TypeToolStarted)); got != len(sc.Tools) {
			t.Errorf("turn %s (%s) started %d tool calls, want %d (%v)", f.turnID, names[i], got, len(sc.Tools), sc.Tools)
		}
		if len(done.Messages) == 0 {
			t.Errorf("turn %s completed without a transcript", f.turnID)
		}
	}
	if err := rnc.Publish(s.subj.TurnSubmit(), []byte("{}")); err != nil {
		t.Fatal(err)
	}
	_ = rnc.Flush()
	var logs string
	s.eventually(time.Minute, "nats-server refuses the reader's submit", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		logs, err = s.compose(ctx, "logs", "--no-color", "nats")
		return err == nil && strings.Contains(logs, `Publish Violation`) && strings.Contains(logs, s.subj.TurnSubmit()), fmt.Sprint(err)
	})
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, "Violation") && !strings.Contains(line, user(permissions.Reader)) {
			t.Errorf("nats-server refused a service: %s", line)
		}
	}
}
