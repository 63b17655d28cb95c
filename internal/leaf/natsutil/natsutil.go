// Package natsutil starts the embedded NATS server and connects clients the
// way every llmworker command does (docs/architecture.md#shape and docs/protocol.md §1): $NATS_URL (with
// $NATS_CREDS) when set, otherwise an in-process nats-server with JetStream.
package natsutil

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ErrNotReady is returned by StartEmbedded when the server does not accept
// connections in time.
var ErrNotReady = errors.New("natsutil: embedded nats-server not ready")

// ErrAddrInUse is returned by StartEmbedded when another process listens
// on the address asked for. It is found before the server starts, so the
// error comes at once instead of after the readiness timeout.
var ErrAddrInUse = errors.New("address already in use")

// ErrStoreInUse is returned by StartEmbedded when another process runs an
// embedded server on the same StoreDir: two servers writing one
// JetStream directory would corrupt it.
var ErrStoreInUse = errors.New("store directory in use by another process")

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
	// SyncInterval is how often JetStream fsyncs what it stored. 0 means
	// every write before it is acknowledged (nats-server's sync_interval:
	// always), so that an acknowledged event, tool result or checkpoint
	// survives a power loss or kernel crash; a positive interval trades
	// that for throughput (docs/architecture.md#durability).
	SyncInterval time.Duration
	// MaxPayload is the largest message the server takes (0: 8 MiB).
	MaxPayload int32
}

// Embedded is a running in-process nats-server.
type Embedded struct {
	Server *server.Server
	// StoreDir is JetStream's directory (temporary unless asked for).
	StoreDir string
	tempDir  string
	unlock   func()
}

// StartEmbedded starts nats-server in-process with JetStream on and waits
// until it accepts connections.
func StartEmbedded(o EmbeddedOptions) (*Embedded, error) {
	e := &Embedded{}
	host := o.Host
	if host == "" {
		host = "127.0.0.1"
	}
	port := o.Port
	if port == 0 {
		port = server.RANDOM_PORT
	} else if err := probeListen(host, port); err != nil {
		return nil, err
	}
	dir := o.StoreDir
	if dir == "" {
		d, err := os.MkdirTemp("", "llmw-nats-*")
		if err != nil {
			return nil, fmt.Errorf("natsutil: store dir: %w", err)
		}
		dir, e.tempDir = d, d
	} else {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("natsutil: store dir: %w", err)
		}
		unlock, err := lockDir(dir)
		if err != nil {
			return nil, err
		}
		e.unlock = unlock
	}
	e.StoreDir = dir
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
	if o.MaxPayload > 0 {
		opts.MaxPayload = o.MaxPayload
	}
	if o.SyncInterval > 0 {
		opts.SyncInterval = o.SyncInterval
	} else {
		opts.SyncAlways = true
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
	if e.unlock != nil {
		e.unlock()
		e.unlock = nil
	}
}

// Temporary reports whether the store is a temporary directory that
// Shutdown removes (nothing in it outlives the process).
func (e *Embedded) Temporary() bool { return e.tempDir != "" }

// probeListen fails with ErrAddrInUse when host:port is taken. The server
// itself would only log the failure and never become ready.
func probeListen(host string, port int) error {
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return fmt.Errorf("natsutil: listen on %s: %w", addr, ErrAddrInUse)
		}
		return fmt.Errorf("natsutil: listen on %s: %w", addr, err)
	}
	return ln.Close()
}

// lockFile is the file in a store directory that marks it in use.
const lockFile = "llmworker.lock"

// lockDir takes the store directory for this process (see lock_*.go).
func lockDir(dir string) (func(), error) {
	path := filepath.Join(dir, lockFile)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("natsutil: lock %s: %w", path, err)
	}
	if err := tryLock(f); err != nil {
		pid, _ := os.ReadFile(path)
		_ = f.Close()
		return nil, fmt.Errorf("natsutil: %s: %w (pid %s holds %s); stop it or pick another directory", dir, ErrStoreInUse, string(pid), lockFile)
	}
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())), 0)
	return func() { _ = f.Close() }, nil
}

// Config says how to reach NATS. The zero value reads the environment.
type Config struct {
	// URL of the NATS server; "" reads $NATS_URL; if that is empty too an
	// embedded server is started.
	URL string
	// Auth is how the client authenticates and checks the server; each
	// empty field reads its environment variable (AuthFromEnv).
	Auth Auth
	// Name is the client connection name.
	Name string
	// StoreDir for an embedded server's JetStream ("" = temporary).
	StoreDir string
	// ConnectWait is how long the first connection is retried when the
	// server cannot be reached yet (0 = DefaultConnectWait; negative =
	// once): a service often starts before NATS, or before its name
	// resolves (a restarted container, a pod whose Service has no
	// endpoints yet).
	ConnectWait time.Duration
	// OnRetry, when set, is told of each failed attempt before the next.
	OnRetry func(err error, next time.Duration)
}

// PingInterval is how often a service's connection pings its server:
// when MaxPingsOut pings in a row went unanswered, the next tick counts
// the connection dead and the client reconnects to another node. A node
// cut off by a partition sends no reset, so without pings the connection
// looks alive for as long as TCP retransmits (many minutes), and nats.go's
// default (a ping every 2 minutes, 2 outstanding) takes 4 to 6 minutes.
// Here a dead connection is found (MaxPingsOut+1)×PingInterval after the
// last ping its server answered (DeadAfter, 9 s; 6 to 9 s after the
// partition): well within the 20 s a
// tool host's catalog claims outlive a failed renewal (toolexec's
// CatalogTTL minus its renewal interval), which also has to cover the
// bucket's leader election and the retry of the renewal. The cost is one
// PING and its PONG (6 bytes each) per connection every 3 s. Two
// outstanding rather than one so that one ping held up behind a large
// write (a transcript of several MB) does not end a healthy connection.
const (
	PingInterval = 3 * time.Second
	MaxPingsOut  = 2
	// DeadAfter bounds the time from a server's last answer until the
	// client counts the connection dead.
	DeadAfter = (MaxPingsOut + 1) * PingInterval
)

// Liveness returns the ping options of every service connection
// (PingInterval, MaxPingsOut).
func Liveness() []nats.Option {
	return []nats.Option{nats.PingInterval(PingInterval), nats.MaxPingsOutstanding(MaxPingsOut)}
}

// DefaultConnectWait is Config.ConnectWait's default.
const DefaultConnectWait = 30 * time.Second

// Conn is a client connection and, when one was started, the embedded
// server behind it.
type Conn struct {
	NC       *nats.Conn
	Embedded *Embedded
	// callbacksDone closes when nats.go has run the connection's last
	// callback: it runs them on a goroutine of its own, in order, and the
	// closed callback comes last.
	callbacksDone chan struct{}
}

// Connect connects as Config says, starting an embedded server when no URL
// is configured (Auth then does not apply: the embedded server listens on
// loopback without authentication or TLS). Cancelling ctx stops the
// retries of the first connection.
func Connect(ctx context.Context, c Config, opts ...nats.Option) (*Conn, error) {
	url := c.URL
	if url == "" {
		url = os.Getenv("NATS_URL")
	}
	var auth []nats.Option
	if url != "" {
		var err error
		if auth, err = c.Auth.Or(AuthFromEnv(os.Getenv)).Options(); err != nil {
			return nil, err
		}
	}
	out := &Conn{callbacksDone: make(chan struct{})}
	if url == "" {
		emb, err := StartEmbedded(EmbeddedOptions{StoreDir: c.StoreDir})
		if err != nil {
			return nil, err
		}
		out.Embedded = emb
		url = emb.URL()
	}
	o := append([]nats.Option{nats.MaxReconnects(-1)}, Liveness()...)
	if c.Name != "" {
		o = append(o, nats.Name(c.Name))
	}
	o = append(o, auth...)
	o = append(o, opts...)
	var once sync.Once
	o = append(o, nats.ClosedHandler(func(*nats.Conn) { once.Do(func() { close(out.callbacksDone) }) }))
	nc, err := Dial(ctx, url, c, o...)
	if err != nil {
		out.Embedded.Shutdown()
		return nil, fmt.Errorf("natsutil: connect %s: %w", url, err)
	}
	out.NC = nc
	return out, nil
}

// Dial makes the first connection to url, retried with backoff up to
// c.ConnectWait (c's other fields are not used). Cancelling ctx stops the
// retries (not the connection once made).
func Dial(ctx context.Context, url string, c Config, o ...nats.Option) (*nats.Conn, error) {
	var nc *nats.Conn
	err := Retry(ctx, c.ConnectWait, func(error) bool { return true }, c.OnRetry, func() error {
		var err error
		nc, err = nats.Connect(url, o...)
		return err
	})
	return nc, err
}

// Retry calls f until it returns nil or an error that again rejects,
// backing off from 100 ms to 2 s between calls, for at most wait
// (0 = DefaultConnectWait; negative = one call). onRetry, when set, is told
// of each failure that will be retried. Cancelling ctx stops the waiting:
// Retry then returns f's last error joined with ctx's.
func Retry(ctx context.Context, wait time.Duration, again func(error) bool, onRetry func(err error, next time.Duration), f func() error) error {
	if wait == 0 {
		wait = DefaultConnectWait
	}
	deadline := time.Now().Add(wait)
	backoff := 100 * time.Millisecond
	for {
		err := f()
		if err == nil || wait < 0 || !again(err) || time.Now().Add(backoff).After(deadline) {
			return err
		}
		if onRetry != nil {
			onRetry(err, backoff)
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return errors.Join(err, context.Cause(ctx))
		case <-t.C:
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// APIErrorPasses reports a JetStream API refusal that passes: 503
// (JetStream or its meta leader unavailable), 500 (a stream or consumer
// without quorum), 408 (the server's own timeout). A KV watch's consumer
// is created through nats.go's older JetStream API, whose refusals are
// *nats.APIError; the jetstream package's are *jetstream.APIError.
func APIErrorPasses(err error) bool {
	var api *jetstream.APIError
	if errors.As(err, &api) {
		return api.Code == 503 || api.Code == 500 || api.Code == 408
	}
	var old *nats.APIError
	return errors.As(err, &old) && (old.Code == 503 || old.Code == 500 || old.Code == 408)
}

// Transient reports whether err is one that a JetStream cluster gives
// while it elects a leader, a node restarts or the client reconnects:
// the same request is worth repeating shortly. A service start retries
// these instead of exiting.
func Transient(err error) bool {
	var api *jetstream.APIError
	var old *nats.APIError
	if errors.As(err, &api) || errors.As(err, &old) {
		return APIErrorPasses(err)
	}
	return errors.Is(err, nats.ErrTimeout) || errors.Is(err, nats.ErrNoResponders) ||
		errors.Is(err, nats.ErrConnectionReconnecting) || errors.Is(err, nats.ErrDisconnected) ||
		errors.Is(err, jetstream.ErrJetStreamNotEnabled) || errors.Is(err, context.DeadlineExceeded)
}

// LogEvents returns the options that log a client connection's life: the
// first connection (info, with the server), a lost connection (warn, with
// the error and the server it was to), a reconnect (info, with the server)
// and the final close. Without them a service loses NATS in silence, and
// without the servers a log does not tell which node a service left for
// which.
func LogEvents(log *slog.Logger) []nats.Option {
	// nats.go calls these in order on one goroutine, and when a
	// connection is lost nc names no server (it is reconnecting): the
	// last one connected to is kept here.
	var last atomic.Value
	connected := func(msg string) nats.ConnHandler {
		return func(nc *nats.Conn) {
			url := nc.ConnectedUrlRedacted()
			if url != "" {
				last.Store(url)
			}
			log.Info(msg, "url", url)
		}
	}
	return []nats.Option{
		nats.ConnectHandler(connected("connected to NATS")),
		nats.DisconnectErrHandler(func(nc *nats.Conn, err error) {
			if err != nil {
				url, _ := last.Load().(string)
				log.Warn("NATS connection lost; reconnecting", "url", url, "err", err)
			}
		}),
		nats.ReconnectHandler(connected("reconnected to NATS")),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			subj := ""
			if sub != nil {
				subj = sub.Subject
			}
			log.Warn("NATS error", "subject", subj, "err", err)
		}),
	}
}

// Close drains the connection (in-flight messages are delivered), waits
// (up to 5 s) for the connection's callbacks (LogEvents' lines) to finish,
// so that none writes to a log its owner has stopped using, and stops an
// embedded server.
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
		if c.callbacksDone != nil {
			select {
			case <-c.callbacksDone:
			case <-time.After(5 * time.Second):
			}
		}
	}
	c.Embedded.Shutdown()
}
