package natsutil_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"

	"github.com/llmworker/llmworker/internal/leaf/natsutil"
	"github.com/llmworker/llmworker/pkg/natstest"
)

// startTLS starts a nats-server on loopback that requires TLS with the
// test CA's server certificate (and, with verify, a client certificate
// the CA signed), and the users and nkeys given; it returns its tls:// URL.
func startTLS(t *testing.T, p natstest.PKI, verify bool, users []*server.User, nkeys []*server.NkeyUser) string {
	t.Helper()
	tc, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: p.ServerCert, KeyFile: p.ServerKey, CaFile: p.CA, Verify: verify})
	if err != nil {
		t.Fatal(err)
	}
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true,
		TLS: true, TLSVerify: verify, TLSConfig: tc, TLSTimeout: 2, Users: users, Nkeys: nkeys})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(5 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	t.Cleanup(s.Shutdown)
	return "tls://" + s.Addr().String()
}

// A command reaches a server that requires TLS and authentication with
// the nats CLI's settings: the test CA, then a user and password, an nkey
// seed file, or a client certificate; and each wrong or missing setting is
// refused by the server (or, for settings that cannot work, before
// connecting) with an error that says what was wrong.
func TestConnectWithTLSAndCredentials(t *testing.T) {
	for _, v := range []string{"NATS_URL", "NATS_CREDS", "NATS_USER", "NATS_PASSWORD", "NATS_NKEY", "NATS_CA", "NATS_CERT", "NATS_KEY"} {
		t.Setenv(v, "")
	}
	p := natstest.NewPKI(t, "127.0.0.1")
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := kp.PublicKey()
	seed, _ := kp.Seed()
	seedFile := filepath.Join(t.TempDir(), "user.nk")
	if err := os.WriteFile(seedFile, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	users := startTLS(t, p, false, []*server.User{{Username: "turn", Password: "s3cret"}}, []*server.NkeyUser{{Nkey: pub}})
	certs := startTLS(t, p, true, nil, nil)

	connect := func(url string, a natsutil.Auth) error {
		c, err := natsutil.Connect(context.Background(), natsutil.Config{URL: url, Auth: a, ConnectWait: -1})
		if err == nil {
			defer c.NC.Close()
			if st, err := c.NC.TLSConnectionState(); err != nil || !st.HandshakeComplete {
				t.Errorf("connected to %s without TLS: %v", url, err)
			}
		}
		return err
	}
	for _, c := range []struct {
		name string
		url  string
		auth natsutil.Auth
		want string // "" = connects; else a part of the error
	}{
		{"user and password", users, natsutil.Auth{CA: p.CA, User: "turn", Password: "s3cret"}, ""},
		{"nkey seed", users, natsutil.Auth{CA: p.CA, NKey: seedFile}, ""},
		{"client certificate", certs, natsutil.Auth{CA: p.CA, Cert: p.ClientCert, Key: p.ClientKey}, ""},
		{"wrong password", users, natsutil.Auth{CA: p.CA, User: "turn", Password: "guess"}, "authorization violation"},
		{"no credentials", users, natsutil.Auth{CA: p.CA}, "authorization violation"},
		{"server certificate not trusted", users, natsutil.Auth{User: "turn", Password: "s3cret"}, "certificate"},
		{"no client certificate", certs, natsutil.Auth{CA: p.CA}, "tls"},
		{"unreadable nkey seed", users, natsutil.Auth{CA: p.CA, NKey: filepath.Join(t.TempDir(), "none.nk")}, "NATS_NKEY"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := connect(c.url, c.auth)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("connect: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(c.want))):
				t.Fatalf("connect: %v, want an error about %q", err, c.want)
			}
		})
	}

	// Settings that cannot work are refused before any connection, naming
	// the variables.
	for _, c := range []struct {
		auth natsutil.Auth
		want []string
	}{
		{natsutil.Auth{Cert: p.ClientCert}, []string{"NATS_CERT", "NATS_KEY"}},
		{natsutil.Auth{Password: "pw"}, []string{"NATS_PASSWORD", "NATS_USER"}},
		{natsutil.Auth{Creds: "x.creds", User: "u"}, []string{"NATS_CREDS", "NATS_USER"}},
	} {
		_, err := c.auth.Options()
		if !errors.Is(err, natsutil.ErrAuthConfig) {
			t.Errorf("%+v: %v, want ErrAuthConfig", c.auth, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%+v: %q does not name %s", c.auth, err, w)
			}
		}
	}

	// The variables of the nats CLI fill what the flags leave empty.
	t.Setenv("NATS_USER", "turn")
	t.Setenv("NATS_PASSWORD", "s3cret")
	if err := connect(users, natsutil.Auth{CA: p.CA}); err != nil {
		t.Errorf("user and password from the environment: %v", err)
	}
}
