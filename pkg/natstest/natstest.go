// Package natstest is the test kit of llmworker's NATS packages, as
// net/http/httptest is net/http's: an embedded nats-server with JetStream on
// a random loopback port per test, a connection to it, and a polling helper
// for conditions that become true asynchronously. Every test in the module
// that needs a broker uses it, so that the server's options (payload limit,
// store, JetStream) are the ones production's embedded server runs with.
// New starts the same server outside a test: the runnable Examples of the
// NATS packages use it, and so can code in another module.
package natstest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/internal/leaf/natsutil"
	"github.com/llmworker/llmworker/internal/leaf/poll"
	"github.com/llmworker/llmworker/pkg/provision"
)

// Options configures Start. The zero value starts a server with JetStream
// in a temporary directory and provisions nothing.
type Options struct {
	// Provision creates llmworker's streams and buckets with these options
	// before Start returns (in memory unless FileStorage is set).
	Provision bool
	// FileStorage provisions file-backed streams (as production does)
	// instead of memory ones.
	FileStorage bool
	// Prefix is the subject prefix Provision uses ("" = llmw).
	Prefix string
	// MaxPayload is the server's max_payload (0: the embedded server's
	// 8 MiB), for tests of what does not fit into one message.
	MaxPayload int32
	// ConnOptions are added to the connection's options.
	ConnOptions []nats.Option
}

// Server is an embedded nats-server and one client connection to it. A
// Server from Start is closed by t.Cleanup; one from New by Close.
type Server struct {
	Embedded *natsutil.Embedded
	NC       *nats.Conn
	JS       jetstream.JetStream
}

// URL is the server's client URL, for a second connection or a subprocess.
func (s *Server) URL() string { return s.Embedded.URL() }

// Connect opens another connection to the server, closed by t.Cleanup.
func (s *Server) Connect(t testing.TB, opts ...nats.Option) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(s.URL(), opts...)
	if err != nil {
		t.Fatalf("natstest: connect: %v", err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// Start starts a server for t. It fails t when the server cannot start.
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// New starts a server outside a test (a runnable Example, a program's own
// test harness, a demo); Close stops it. Start is New for a test.
func New(o Options) (*Server, error) {
	e, err := natsutil.StartEmbedded(natsutil.EmbeddedOptions{MaxPayload: o.MaxPayload})
	if err != nil {
		return nil, fmt.Errorf("natstest: start nats-server: %w", err)
	}
	s := &Server{Embedded: e}
	if s.NC, err = nats.Connect(e.URL(), o.ConnOptions...); err != nil {
		e.Shutdown()
		return nil, fmt.Errorf("natstest: connect: %w", err)
	}
	if s.JS, err = jetstream.New(s.NC); err != nil {
		s.Close()
		return nil, fmt.Errorf("natstest: jetstream: %w", err)
	}
	if o.Provision {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := provision.Provision(ctx, s.JS, provision.Options{Prefix: o.Prefix, Memory: !o.FileStorage}); err != nil {
			s.Close()
			return nil, fmt.Errorf("natstest: provision: %w", err)
		}
	}
	return s, nil
}

// Close closes the connection and shuts the server down, removing its
// store.
func (s *Server) Close() {
	if s.NC != nil {
		s.NC.Close()
	}
	s.Embedded.Shutdown()
}

// Context returns a context that ends after 30 s or when t ends, so that a
// hung call fails the test instead of the run.
func Context(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// Eventually polls cond every few milliseconds until it holds, and fails t
// with "timed out waiting for <what>" when it does not within 10 s. It is
// the way tests wait for asynchronous effects: never a bare sleep.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	EventuallyWithin(t, 10*time.Second, what, cond)
}

// EventuallyWithin is Eventually with another limit.
func EventuallyWithin(t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, limit, what, cond)
}

// LaggingReplica adds a member to stream's direct-get group that stays
// where the stream is now, as a replica cut off from its cluster does: a
// mirror of the stream (MirrorDirect, as KV mirrors have), which joins
// the group once it caught up, then sealed so that it stores nothing
// more. From then on a share of the direct gets (kv.Get,
// Stream.GetLastMsgForSubject) is answered from that copy: old revisions,
// and nothing for what was stored later. The stream must hold a message
// (a mirror joins the group at its first). The mirror is named
// LAGGING_<stream>.
func LaggingReplica(t testing.TB, js jetstream.JetStream, stream string) {
	t.Helper()
	ctx := Context(t)
	src, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatalf("natstest: lagging replica of %s: %v", stream, err)
	}
	last := src.CachedInfo().State.LastSeq
	if last == 0 {
		t.Fatalf("natstest: lagging replica of %s: the stream is empty, and an empty mirror answers no direct get", stream)
	}
	mirror, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name: "LAGGING_" + stream, MirrorDirect: true, Storage: jetstream.MemoryStorage,
		Mirror: &jetstream.StreamSource{Name: stream},
	})
	if err != nil {
		t.Fatalf("natstest: lagging replica of %s: %v", stream, err)
	}
	Eventually(t, "the mirror of "+stream+" caught up", func() bool {
		mi, err := mirror.Info(ctx)
		return err == nil && mi.State.LastSeq >= last
	})
	cfg := mirror.CachedInfo().Config
	cfg.Sealed = true
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatalf("natstest: seal the mirror of %s: %v", stream, err)
	}
	// The mirror goes before the server does (cleanups run last first):
	// a mirror that outlives its source asks for a consumer again and
	// waits up to 30 s for the answer on a goroutine that server shutdown
	// does not stop (NotOurGoroutines).
	t.Cleanup(func() {
		dctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = js.DeleteStream(dctx, "LAGGING_"+stream)
	})
}
