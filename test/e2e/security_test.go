//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
	"github.com/testcontainers/testcontainers-go"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/natstest"
	"github.com/llmworker/llmworker/pkg/permissions"
)

// testUser is the test process's own identity on a secure cluster: every
// right, to watch and check.
const testUser = "test"

// secure is the PKI and the passwords of a cluster whose nodes require
// TLS and the identities of `llmworker permissions`.
type secure struct {
	pki natstest.PKI
	pw  map[string]string // by user
}

func newSecure(t *testing.T) *secure {
	s := &secure{pki: natstest.NewPKI(t, "n1", "n2", "n3", "127.0.0.1", "localhost"), pw: map[string]string{testUser: nuid.Next()}}
	for _, u := range permissions.DefaultUsers() {
		s.pw[u.Name] = nuid.Next()
	}
	return s
}

func user(r permissions.Role) string { return "llmw-" + string(r) }

// roleOf is the role a service container runs as.
func roleOf(name string) permissions.Role {
	for _, r := range []permissions.Role{permissions.Ingest, permissions.Turn, permissions.Toolexec, permissions.Hookbridge} {
		if strings.HasPrefix(name, string(r)+"-") {
			return r
		}
	}
	panic("no role for " + name)
}

// nodeConf puts the node configuration and the certificates in the
// nodes' and services' file lists and returns the configuration's path
// and the nodes' environment (the passwords the configuration names).
func (s *secure) nodeConf(c *cluster) (string, []string) {
	auth := permissions.Config("", permissions.DefaultUsers())
	auth = strings.Replace(auth, "  users = [\n", fmt.Sprintf("  users = [\n    { user: %q, password: $E2E_TEST_PASSWORD }\n", testUser), 1)
	conf := "include \"" + natsConfName + "\"\n" +
		"tls { cert_file: \"/certs/server.pem\", key_file: \"/certs/server-key.pem\", ca_file: \"/certs/ca.pem\", timeout: 5 }\n" + auth
	file := func(path, dst string) testcontainers.ContainerFile {
		b, err := os.ReadFile(path)
		if err != nil {
			c.t.Fatal(err)
		}
		return testcontainers.ContainerFile{Reader: strings.NewReader(string(b)), ContainerFilePath: dst, FileMode: 0o644}
	}
	for _, n := range nodeNames {
		c.files[n] = append(c.files[n], file(s.pki.CA, "/certs/ca.pem"), file(s.pki.ServerCert, "/certs/server.pem"), file(s.pki.ServerKey, "/certs/server-key.pem"),
			testcontainers.ContainerFile{Reader: strings.NewReader(conf), ContainerFilePath: "/secure.conf", FileMode: 0o644})
	}
	for _, n := range []string{"ingest-1", "turn-1", "turn-2", "toolexec-1", "toolexec-2", "hookbridge-1"} {
		c.files[n] = append(c.files[n], file(s.pki.CA, "/certs/ca.pem"))
	}
	env := []string{"E2E_TEST_PASSWORD=" + s.pw[testUser]}
	for _, u := range permissions.DefaultUsers() {
		env = append(env, u.PasswordEnv+"="+s.pw[u.Name])
	}
	return "/secure.conf", env
}

// as is the client options of a user of the test process.
func (s *secure) as(name string) []nats.Option {
	return []nats.Option{nats.UserInfo(name, s.pw[name]), nats.RootCAs(s.pki.CA)}
}

// env is the environment of a command run as role, trusting ca.
func (s *secure) env(r permissions.Role, ca string) func(string) string {
	m := map[string]string{"NATS_USER": user(r), "NATS_PASSWORD": s.pw[user(r)], "NATS_CA": ca}
	return func(k string) string { return m[k] }
}

// serviceEnv is a service container's environment: its identity, the CA
// in the container, and provisioning left to the provisioner.
func (s *secure) serviceEnv(_ *cluster, name string) []string {
	u := user(roleOf(name))
	return []string{"NATS_USER=" + u, "NATS_PASSWORD=" + s.pw[u], "NATS_CA=/certs/ca.pem", "LLMW_PROVISION_VERIFY=true"}
}

// The three-node cluster with TLS from a CA made in the test and one
// identity per service from `llmworker permissions` (docs/security.md):
// every service connects as its role over TLS and checks, rather than
// creates, the streams the provisioner made; a turn with a tool call
// completes, a submitter cancels a second turn mid-tool-call and a reader
// replays the first from the stream, with nothing refused by any node;
// then a client with the
// toolexec identity that forges a worker event is refused, and clients
// without the CA or without credentials cannot connect.
func TestSecureCluster(t *testing.T) {
	t.Parallel()
	c := startCluster(t, clusterOpts{secure: true, slow: "fixed_version=4s"})
	const id = "secure-1"
	f := c.follow(id)
	c.submit(id, "anthropic")
	done := f.completed(turnTimeout)
	c.checkTranscript(id, "anthropic", done)

	// Clients in their roles over TLS: the submitter cancels a turn
	// while its tool runs, and the reader replays the first turn from the
	// stream afterwards.
	as := func(r permissions.Role) *nats.Conn {
		nc, err := nats.Connect("nats://n1:4222", append(c.sec.as(user(r)), nats.SetCustomDialer(&nodeDialer{c: c}))...)
		if err != nil {
			t.Fatalf("connect as %s: %v", r, err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
	const cancelled = "secure-2"
	f2 := c.follow(cancelled)
	c.submit(cancelled, "anthropic")
	f2.wait(time.Minute, events.TypeToolStarted)
	submitter := as(permissions.Submitter)
	if err := submitter.Publish(c.subj.TurnCancel(cancelled), nil); err != nil {
		t.Fatal(err)
	}
	if end := f2.wait(time.Minute, events.TypeTurnCompleted, events.TypeTurnFailed, events.TypeTurnAborted); end.Type != events.TypeTurnAborted {
		t.Errorf("the cancelled turn ended %s", end.Type)
	}
	rjs, err := jetstream.New(as(permissions.Reader))
	if err != nil {
		t.Fatal(err)
	}
	replayed := 0
	c.retry("the reader replays "+id, func(ctx context.Context) error {
		oc, err := rjs.OrderedConsumer(ctx, events.StreamEvents, jetstream.OrderedConsumerConfig{FilterSubjects: []string{c.subj.EventsOfTurn(id)}})
		if err != nil {
			return err
		}
		replayed = 0
		for {
			m, err := oc.Next(jetstream.FetchMaxWait(2 * time.Second))
			if err != nil {
				return err
			}
			replayed++
			if m.Headers().Get(events.HeaderType) == events.TypeTurnCompleted {
				return nil
			}
		}
	})
	if replayed != len(f.events()) {
		t.Errorf("the reader replayed %d events of %s, the follower saw %d", replayed, id, len(f.events()))
	}
	for _, n := range nodeNames {
		if l := c.logs(n); strings.Contains(l, "Violation - ") {
			t.Errorf("node %s refused what a role needs:\n%s", n, tail(l, 4000))
		}
	}

	// A forged worker event from the toolexec identity.
	errs := make(chan error, 4)
	opts := append(c.sec.as(user(permissions.Toolexec)), nats.SetCustomDialer(&nodeDialer{c: c}),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errs <- err }))
	nc, err := nats.Connect("nats://n1:4222", opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	forged := c.subj.Emit("", id, events.ChannelTurn)
	if err := nc.Publish(forged, []byte("{}")); err != nil {
		t.Fatal(err)
	}
	_ = nc.Flush()
	select {
	case err := <-errs:
		if !strings.Contains(err.Error(), "Permissions Violation") || !strings.Contains(err.Error(), forged) {
			t.Errorf("forged event: %v, want a permissions violation naming %s", err, forged)
		}
	case <-time.After(10 * time.Second):
		t.Error("the forged worker event was not refused")
	}

	// No CA: the node's certificate is not trusted. No credentials: no
	// connection.
	dial := func(o ...nats.Option) error {
		nc, err := nats.Connect("nats://n1:4222", append(o, nats.SetCustomDialer(&nodeDialer{c: c}), nats.Timeout(5*time.Second))...)
		if err == nil {
			nc.Close()
		}
		return err
	}
	if err := dial(nats.UserInfo(testUser, c.sec.pw[testUser])); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("without the CA: %v, want a certificate error", err)
	}
	if err := dial(nats.RootCAs(c.sec.pki.CA)); err == nil || !strings.Contains(strings.ToLower(err.Error()), "authorization") {
		t.Errorf("without credentials: %v, want an authorization error", err)
	}
}
