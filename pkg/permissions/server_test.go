package permissions_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"go.uber.org/goleak"

	"github.com/llmworker/llmworker/pkg/natstest"
	"github.com/llmworker/llmworker/pkg/permissions"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// observer is a user of the test's server with every right: it sees what a
// role's publishes deliver and publishes what a role's subscriptions get.
const observer, observerPassword = "observer", "observer-password"

// startServer runs a nats-server with the authorization block Config
// renders for prefix (one user per role, DefaultUsers) plus the observer;
// it returns its URL and the role users' passwords.
func startServer(t *testing.T, prefix string) (string, map[permissions.Role]string) {
	t.Helper()
	pw := map[permissions.Role]string{}
	for _, u := range permissions.DefaultUsers() {
		pw[u.Role] = "pw-" + string(u.Role)
		t.Setenv(u.PasswordEnv, pw[u.Role])
	}
	auth := permissions.Config(prefix, permissions.DefaultUsers())
	const users = "  users = [\n"
	if !strings.Contains(auth, users) {
		t.Fatalf("Config has no users list:\n%s", auth)
	}
	auth = strings.Replace(auth, users, users+fmt.Sprintf("    { user: %q, password: %q }\n", observer, observerPassword), 1)
	conf := filepath.Join(t.TempDir(), "nats.conf")
	if err := os.WriteFile(conf, []byte("listen: \"127.0.0.1:-1\"\n"+auth), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(conf)
	if err != nil {
		t.Fatalf("nats-server refuses the configuration: %v\n%s", err, auth)
	}
	opts.NoSigs, opts.NoLog = true, true
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	t.Cleanup(func() {
		srv.Shutdown()
		srv.WaitForShutdown()
	})
	return srv.ClientURL(), pw
}

// refusals collects the subjects the server refused a connection, as it
// says in its -ERR: "Permissions Violation for Publish to "<subject>"".
type refusals struct {
	mu  sync.Mutex
	pub []string
	sub []string
}

var violationRe = regexp.MustCompile(`(?i)permissions violation for (publish|subscription) to "([^"]+)"`)

func (r *refusals) handler(_ *nats.Conn, _ *nats.Subscription, err error) {
	m := violationRe.FindStringSubmatch(err.Error())
	if m == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if strings.EqualFold(m[1], "publish") {
		r.pub = append(r.pub, m[2])
	} else {
		r.sub = append(r.sub, m[2])
	}
}

func (r *refusals) take() (pub, sub []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	pub, sub, r.pub, r.sub = r.pub, r.sub, nil, nil
	return pub, sub
}

func connect(t *testing.T, url, user, password string, o ...nats.Option) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url, append([]nats.Option{nats.UserInfo(user, password)}, o...)...)
	if err != nil {
		t.Fatalf("connect as %s: %v", user, err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// within reports whether every subject pattern a matches also matches b,
// by NATS's wildcard rules (* one token, > one or more at the end). A
// subject without wildcards is within b when b matches it.
func within(a, b string) bool {
	ta, tb := strings.Split(a, "."), strings.Split(b, ".")
	for i, t := range tb {
		if t == ">" {
			return len(ta) > i
		}
		if i >= len(ta) || ta[i] == ">" {
			return false
		}
		if t != "*" && ta[i] != t {
			return false
		}
	}
	return len(ta) == len(tb)
}

func withinAny(a string, allowed []string) bool {
	return slices.ContainsFunc(allowed, func(b string) bool { return within(a, b) })
}

// concrete is a subject that pattern matches: each wildcard a token.
func concrete(pattern string) string {
	ts := strings.Split(pattern, ".")
	for i, t := range ts {
		if t == "*" || t == ">" {
			ts[i] = fmt.Sprintf("w%d", i)
		}
	}
	return strings.Join(ts, ".")
}

// Every role on a server that enforces Config: each subject of its
// publish allow list is delivered, each of its subscribe allow list gets
// what is published there, a responder role answers a request and another
// role cannot; and every subject of any other role's lists that its own do
// not cover is refused with a permissions violation, publish and
// subscribe, and delivers nothing.
func TestEachRoleOnAnEnforcingServer(t *testing.T) {
	for _, prefix := range []string{"", "acme"} {
		t.Run("prefix="+prefix, func(t *testing.T) {
			url, pw := startServer(t, prefix)
			obs := connect(t, url, observer, observerPassword)

			// Every subject any role's lists name.
			var universe []string
			for _, r := range permissions.Roles {
				p := permissions.For(r, prefix)
				universe = append(universe, p.Publish...)
				universe = append(universe, p.Subscribe...)
			}
			slices.Sort(universe)
			universe = slices.Compact(universe)

			for _, role := range permissions.Roles {
				t.Run(string(role), func(t *testing.T) {
					checkRole(t, url, "llmw-"+string(role), pw[role], permissions.For(role, prefix), universe, obs)
				})
			}
		})
	}
}

func checkRole(t *testing.T, url, user, password string, p permissions.Permissions, universe []string, obs *nats.Conn) {
	ref := &refusals{}
	nc := connect(t, url, user, password, nats.ErrorHandler(ref.handler))

	// Publish: what the observer receives of the role's publishes, and
	// what the server refuses.
	var mu sync.Mutex
	seen := map[string]bool{}
	osub, err := obs.Subscribe(">", func(m *nats.Msg) {
		mu.Lock()
		seen[m.Subject] = true
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = osub.Unsubscribe() }()
	if err := obs.Flush(); err != nil {
		t.Fatal(err)
	}
	var allowed, refused []string
	for _, s := range p.Publish {
		allowed = append(allowed, concrete(s))
	}
	for _, s := range universe {
		if c := concrete(s); !withinAny(c, p.Publish) {
			refused = append(refused, c)
		}
	}
	slices.Sort(refused)
	refused = slices.Compact(refused)
	// The allowed first: the server answers in order, so once the refusals
	// of the refused ones are in, so would be any of the allowed.
	for _, s := range append(slices.Clone(allowed), refused...) {
		if err := nc.Publish(s, []byte("x")); err != nil {
			t.Fatalf("publish %s: %v", s, err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	var gotRefused []string
	natstest.Eventually(t, fmt.Sprintf("%d publish refusals", len(refused)), func() bool {
		pub, _ := ref.take()
		gotRefused = append(gotRefused, pub...)
		return len(gotRefused) >= len(refused)
	})
	natstest.Eventually(t, "the allowed publishes delivered", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return !slices.ContainsFunc(allowed, func(s string) bool { return !seen[s] })
	})
	if err := obs.Flush(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(gotRefused)
	if !slices.Equal(gotRefused, refused) {
		t.Errorf("publishes refused:\n%v\nwant (the subjects of other roles its allow list does not cover):\n%v", gotRefused, refused)
	}
	mu.Lock()
	for _, s := range refused {
		if seen[s] {
			t.Errorf("refused publish to %s delivered", s)
		}
	}
	mu.Unlock()

	// Subscribe: each allowed pattern receives what the observer
	// publishes on it; the others are refused.
	got := map[string]bool{}
	var subs []*nats.Subscription
	for _, s := range p.Subscribe {
		sub, err := nc.Subscribe(s, func(m *nats.Msg) {
			mu.Lock()
			got[s] = true
			mu.Unlock()
		})
		if err != nil {
			t.Fatalf("subscribe %s: %v", s, err)
		}
		subs = append(subs, sub)
	}
	var refusedSub []string
	for _, s := range universe {
		if !withinAny(s, p.Subscribe) {
			refusedSub = append(refusedSub, s)
			if _, err := nc.SubscribeSync(s); err != nil {
				t.Fatalf("subscribe %s: %v", s, err)
			}
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	var gotRefusedSub []string
	natstest.Eventually(t, fmt.Sprintf("%d subscription refusals", len(refusedSub)), func() bool {
		_, sub := ref.take()
		gotRefusedSub = append(gotRefusedSub, sub...)
		return len(gotRefusedSub) >= len(refusedSub)
	})
	slices.Sort(gotRefusedSub)
	if !slices.Equal(gotRefusedSub, refusedSub) {
		t.Errorf("subscriptions refused:\n%v\nwant:\n%v", gotRefusedSub, refusedSub)
	}
	for _, s := range p.Subscribe {
		if err := obs.Publish(concrete(s), []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	if err := obs.Flush(); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, "every allowed subscription fed", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return !slices.ContainsFunc(p.Subscribe, func(s string) bool { return !got[s] })
	})

	// Answering a request: a responder's reply reaches the requester,
	// another role's is refused. The request goes to the first subject the
	// role may subscribe to that is not its own inbox, with no other
	// subscription of the role matching it: the server counts each
	// delivery of a request against the one answer allow_responses grants.
	for _, sub := range subs {
		if err := sub.Unsubscribe(); err != nil {
			t.Fatal(err)
		}
	}
	i := slices.IndexFunc(p.Subscribe, func(s string) bool { return !strings.HasPrefix(s, "_INBOX") })
	if i < 0 {
		return
	}
	subj := concrete(p.Subscribe[i])
	rs, err := nc.Subscribe(subj, func(m *nats.Msg) { _ = m.Respond([]byte("answer")) })
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rs.Unsubscribe() }()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	reply := nats.NewInbox()
	answers, err := obs.SubscribeSync(reply)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = answers.Unsubscribe() }()
	if err := obs.PublishRequest(subj, reply, []byte("question")); err != nil {
		t.Fatal(err)
	}
	if p.Responses {
		if _, err := answers.NextMsg(10 * time.Second); err != nil {
			t.Errorf("a responder's answer on %s did not arrive: %v", subj, err)
		}
		return
	}
	natstest.Eventually(t, "the refusal of the answer to "+reply, func() bool {
		pub, _ := ref.take()
		return slices.Contains(pub, reply)
	})
	if err := obs.Flush(); err != nil {
		t.Fatal(err)
	}
	// The refusal is in, after which nothing can still be on its way.
	if m, err := answers.NextMsg(time.Millisecond); err == nil {
		t.Errorf("an answer on %s arrived (%q), but the role has no allow_responses", subj, m.Data)
	}
}
