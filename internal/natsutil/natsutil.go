// Package natsutil starts the embedded NATS server and connects clients the
// way every llmworker command does (DESIGN.md §1–§2): $NATS_URL (with
// $NATS_CREDS) when set, otherwise an in-process nats-server with JetStream.
package natsutil

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// ErrNotReady is returned by StartEmbedded when the server does not accept
// connections in time.
var ErrNotReady = errors.New("natsutil: embedded nats-server not ready")

// EmbeddedOptions configures StartEmbedded. The zero value listens on a
// random loopback port with JetStream in a fresh temporary directory.
type EmbeddedOptions struct {
	// Host to listen on; default 127.0.0.1.
	Host string
	// Port to listen on; 0 picks a free port (-1 also means random).
	Port int
	// StoreDir for JetStream; "" makes a temporary directory that Shutdown
	// removes.
	StoreDir string
	// Logs turns the server's own logging on (to stderr).
	Logs bool
}

// Embedded is a running in-process nats-server.
type Embedded struct {
	Server  *server.Server
	tempDir string
}

// StartEmbedded starts nats-server in-process with JetStream on and waits
// until it accepts connections.
func StartEmbedded(o EmbeddedOptions) (*Embedded, error) {
	e := &Embedded{}
	dir := o.StoreDir
	if dir == "" {
		d, err := os.MkdirTemp("", "llmw-nats-*")
		if err != nil {
			return nil, fmt.Errorf("natsutil: store dir: %w", err)
		}
		dir, e.tempDir = d, d
	}
	host := o.Host
	if host == "" {
		host = "127.0.0.1"
	}
	port := o.Port
	if port == 0 {
		port = server.RANDOM_PORT
	}
	opts := &server.Options{
		Host:                   host,
		Port:                   port,
		JetStream:              true,
		StoreDir:               dir,
		NoSigs:                 true,
		NoLog:                  !o.Logs,
		DisableJetStreamBanner: true,
		// Large enough for a whole transcript in one turn request.
		MaxPayload: 8 << 20,
	}
	s, err := server.NewServer(opts)
	if err != nil {
		e.cleanup()
		return nil, fmt.Errorf("natsutil: new server: %w", err)
	}
	if o.Logs {
		s.ConfigureLogger()
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		e.cleanup()
		return nil, ErrNotReady
	}
	e.Server = s
	return e, nil
}

// URL is the client URL of the server.
func (e *Embedded) URL() string { return e.Server.ClientURL() }

// Shutdown stops the server, waits for it and removes a temporary store.
func (e *Embedded) Shutdown() {
	if e == nil || e.Server == nil {
		return
	}
	e.Server.Shutdown()
	e.Server.WaitForShutdown()
	e.cleanup()
}

func (e *Embedded) cleanup() {
	if e.tempDir != "" {
		_ = os.RemoveAll(e.tempDir)
		e.tempDir = ""
	}
}

// Config says how to reach NATS. The zero value reads the environment.
type Config struct {
	// URL of the NATS server; "" reads $NATS_URL; if that is empty too an
	// embedded server is started.
	URL string
	// Creds is a credentials file; "" reads $NATS_CREDS.
	Creds string
	// Name is the client connection name.
	Name string
	// StoreDir for an embedded server's JetStream ("" = temporary).
	StoreDir string
}

// Conn is a client connection and, when one was started, the embedded
// server behind it.
type Conn struct {
	NC       *nats.Conn
	Embedded *Embedded
}

// Connect connects as Config says, starting an embedded server when no URL
// is configured.
func Connect(c Config, opts ...nats.Option) (*Conn, error) {
	url := c.URL
	if url == "" {
		url = os.Getenv("NATS_URL")
	}
	creds := c.Creds
	if creds == "" {
		creds = os.Getenv("NATS_CREDS")
	}
	out := &Conn{}
	if url == "" {
		emb, err := StartEmbedded(EmbeddedOptions{StoreDir: c.StoreDir})
		if err != nil {
			return nil, err
		}
		out.Embedded = emb
		url = emb.URL()
	}
	o := []nats.Option{nats.MaxReconnects(-1)}
	if c.Name != "" {
		o = append(o, nats.Name(c.Name))
	}
	if creds != "" {
		o = append(o, nats.UserCredentials(creds))
	}
	o = append(o, opts...)
	nc, err := nats.Connect(url, o...)
	if err != nil {
		out.Embedded.Shutdown()
		return nil, fmt.Errorf("natsutil: connect %s: %w", url, err)
	}
	out.NC = nc
	return out, nil
}

// Close drains the connection (in-flight messages are delivered) and stops
// an embedded server.
func (c *Conn) Close() {
	if c == nil {
		return
	}
	if c.NC != nil {
		_ = c.NC.Drain()
		for c.NC.IsDraining() {
			time.Sleep(5 * time.Millisecond)
		}
		c.NC.Close()
	}
	c.Embedded.Shutdown()
}
