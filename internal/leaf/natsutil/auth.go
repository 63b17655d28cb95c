package natsutil

import (
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"
)

// ErrAuthConfig is returned (wrapped, naming the setting) by Auth.Options
// for settings that cannot work together: a client certificate without its
// key, a password without a user, more than one way to authenticate.
var ErrAuthConfig = errors.New("natsutil: invalid NATS authentication settings")

// Auth is how a client proves who it is to NATS and checks the server's
// certificate: the settings, and the environment variables, of the nats
// CLI. The zero value connects without credentials and trusts the system
// CA pool for tls:// URLs.
type Auth struct {
	// Creds is a credentials file: a user JWT and its nkey seed
	// ($NATS_CREDS; decentralized auth, the accounts an operator issues).
	Creds string
	// User and Password authenticate with a server's users list
	// ($NATS_USER, $NATS_PASSWORD; set the password through the
	// environment: a flag shows in the process list).
	User, Password string
	// NKey is a file holding an nkey seed ($NATS_NKEY).
	NKey string
	// CA is a PEM file of the CAs that sign the server's certificate
	// ($NATS_CA). Setting it, or a client certificate, makes the client
	// require TLS.
	CA string
	// Cert and Key are the client's certificate and key, PEM files, for a
	// server that verifies its clients ($NATS_CERT, $NATS_KEY).
	Cert, Key string
}

// AuthFlag is one setting of Auth as every command's flag: its name, the
// environment variable it defaults to (the nats CLI's), and its help.
type AuthFlag struct {
	Name, Env, Usage string
	Value            *string
}

// Flags returns a's settings as flags, in the order help lists them.
func (a *Auth) Flags() []AuthFlag {
	return []AuthFlag{
		{"nats-creds", "NATS_CREDS", "NATS credentials file (user JWT and nkey seed)", &a.Creds},
		{"nats-user", "NATS_USER", "NATS user", &a.User},
		{"nats-password", "NATS_PASSWORD", "NATS password (prefer the variable: a flag shows in the process list)", &a.Password},
		{"nats-nkey", "NATS_NKEY", "file holding the NATS nkey seed", &a.NKey},
		{"nats-ca", "NATS_CA", "PEM file of the CAs that sign the NATS server's certificate (requires TLS)", &a.CA},
		{"nats-cert", "NATS_CERT", "PEM file of the client certificate, for a server that verifies clients", &a.Cert},
		{"nats-key", "NATS_KEY", "PEM file of the client certificate's key", &a.Key},
	}
}

// AuthFromEnv reads Auth from the environment: the variables of Flags.
func AuthFromEnv(getenv func(string) string) Auth {
	var a Auth
	for _, f := range a.Flags() {
		*f.Value = getenv(f.Env)
	}
	return a
}

// Or returns a with each empty field taken from b.
func (a Auth) Or(b Auth) Auth {
	or := func(x, y string) string {
		if x != "" {
			return x
		}
		return y
	}
	return Auth{
		Creds: or(a.Creds, b.Creds), User: or(a.User, b.User), Password: or(a.Password, b.Password),
		NKey: or(a.NKey, b.NKey), CA: or(a.CA, b.CA), Cert: or(a.Cert, b.Cert), Key: or(a.Key, b.Key),
	}
}

// Options returns the nats.go options of a, or an error naming the
// settings that do not fit together (ErrAuthConfig) or the nkey seed file
// that cannot be read.
func (a Auth) Options() ([]nats.Option, error) {
	var ways []string
	if a.Creds != "" {
		ways = append(ways, "credentials file (NATS_CREDS)")
	}
	if a.User != "" {
		ways = append(ways, "user (NATS_USER)")
	}
	if a.NKey != "" {
		ways = append(ways, "nkey (NATS_NKEY)")
	}
	switch {
	case len(ways) > 1:
		return nil, fmt.Errorf("%w: set one way to authenticate, not %s", ErrAuthConfig, strings.Join(ways, " and "))
	case a.Password != "" && a.User == "":
		return nil, fmt.Errorf("%w: a password (NATS_PASSWORD) without a user (NATS_USER)", ErrAuthConfig)
	case (a.Cert == "") != (a.Key == ""):
		return nil, fmt.Errorf("%w: a client certificate (NATS_CERT) and its key (NATS_KEY) go together; got only one", ErrAuthConfig)
	}
	var o []nats.Option
	switch {
	case a.Creds != "":
		o = append(o, nats.UserCredentials(a.Creds))
	case a.User != "":
		o = append(o, nats.UserInfo(a.User, a.Password))
	case a.NKey != "":
		opt, err := nats.NkeyOptionFromSeed(a.NKey)
		if err != nil {
			return nil, fmt.Errorf("natsutil: nkey seed file (NATS_NKEY) %s: %w", a.NKey, err)
		}
		o = append(o, opt)
	}
	if a.CA != "" {
		o = append(o, nats.RootCAs(a.CA))
	}
	if a.Cert != "" {
		o = append(o, nats.ClientCert(a.Cert, a.Key))
	}
	return o, nil
}
