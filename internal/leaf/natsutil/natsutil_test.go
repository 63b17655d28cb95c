package natsutil

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A service that starts before NATS connects once NATS is up, instead of
// exiting: the first connection is retried.
func TestConnectWaitsForTheServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	// The server starts once the first attempt has failed.
	failed := make(chan struct{})
	var once sync.Once
	started := make(chan *Embedded, 1)
	go func() {
		<-failed
		e, err := StartEmbedded(EmbeddedOptions{Port: port})
		if err != nil {
			t.Error(err)
		}
		started <- e
	}()
	retries := 0
	c, err := Connect(context.Background(), Config{URL: "nats://127.0.0.1:" + strconv.Itoa(port), ConnectWait: 20 * time.Second,
		OnRetry: func(error, time.Duration) {
			retries++
			once.Do(func() { close(failed) })
		}})
	once.Do(func() { close(failed) }) // a Connect that never retried: the server still starts, and the test ends
	e := <-started
	defer e.Shutdown()
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	defer c.Close()
	if retries == 0 {
		t.Error("connected without a retry although the server was not up yet")
	}
	// Negative ConnectWait: one attempt.
	if _, err := Connect(context.Background(), Config{URL: "nats://127.0.0.1:1", ConnectWait: -1}); err == nil {
		t.Error("connected to port 1")
	}
}

// A signal during the wait for NATS stops the wait at once: a service told
// to stop does not sit out the whole ConnectWait.
func TestConnectStopsWhenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	attempts := 0
	done := make(chan error, 1)
	go func() {
		_, err := Connect(ctx, Config{URL: "nats://127.0.0.1:1", ConnectWait: time.Hour,
			OnRetry: func(error, time.Duration) {
				attempts++
				if attempts == 2 {
					cancel()
				}
			}})
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want one that wraps context.Canceled", err)
		}
		if !errors.Is(err, nats.ErrNoServers) {
			t.Errorf("err = %v, want one that keeps the last connection error", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Connect went on retrying after its context was cancelled")
	}
}

// Retry stops at the first error it is not told to retry, and gives up
// after the wait.
func TestRetry(t *testing.T) {
	permanent := errors.New("permanent")
	calls := 0
	err := Retry(context.Background(), time.Minute, Transient, nil, func() error {
		calls++
		if calls < 3 {
			return fmt.Errorf("stream info: %w", nats.ErrTimeout)
		}
		return permanent
	})
	if err != permanent || calls != 3 {
		t.Errorf("Retry = %v after %d calls, want the permanent error after 3", err, calls)
	}
	calls = 0
	start := time.Now()
	err = Retry(context.Background(), 500*time.Millisecond, Transient, nil, func() error {
		calls++
		return nats.ErrNoResponders
	})
	if !errors.Is(err, nats.ErrNoResponders) || calls < 2 || time.Since(start) > 5*time.Second {
		t.Errorf("Retry = %v after %d calls in %v, want no responders after a few calls within the wait", err, calls, time.Since(start))
	}
}

func TestTransient(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("x: %w", &jetstream.APIError{Code: 503, ErrorCode: 10008, Description: "JetStream system temporarily unavailable"}), true},
		{&jetstream.APIError{Code: 500, Description: "stream is offline"}, true},
		{fmt.Errorf("watch: %w", &nats.APIError{Code: 503, ErrorCode: 10008, Description: "JetStream system temporarily unavailable"}), true},
		{&nats.APIError{Code: 404, ErrorCode: 10059, Description: "stream not found"}, false},
		{fmt.Errorf("create: %w", context.DeadlineExceeded), true},
		{nats.ErrNoResponders, true},
		{&jetstream.APIError{Code: 400, ErrorCode: 10058, Description: "stream name already in use with a different configuration"}, false},
		{&jetstream.APIError{Code: 404, Description: "stream not found"}, false},
		{context.Canceled, false},
		{errors.New("bad subject"), false},
	} {
		if got := Transient(c.err); got != c.want {
			t.Errorf("Transient(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
