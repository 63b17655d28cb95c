// Command putleak stores one object with nats.go's ObjectStore.Put on an
// embedded server and prints how many of nats.go's reconnect watchers
// (jetstream.(*jetStream).resetPendingAcksOnReconnect) wait on a nil
// channel afterwards: "leaked N". leaks_test.go builds it with a copy of
// nats.go's jetstream/publish.go whose watcher starts late, as one does
// whose thread the system runs only after Put returned.
package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "putleak:", err)
		os.Exit(1)
	}
}

func run() error {
	dir, err := os.MkdirTemp("", "putleak")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: dir, NoSigs: true})
	if err != nil {
		return err
	}
	go s.Start()
	defer s.Shutdown()
	if !s.ReadyForConnections(10 * time.Second) {
		return fmt.Errorf("server not ready")
	}
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	obs, err := js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: "PUTLEAK", Storage: jetstream.MemoryStorage})
	if err != nil {
		return err
	}
	if _, err := obs.Put(ctx, jetstream.ObjectMeta{Name: "o"}, bytes.NewReader([]byte("hello"))); err != nil {
		return err
	}
	// A watcher that read its channel before Put closed it returns; one
	// that reads it after waits on nil for good. Wait until none is left
	// doing anything else.
	deadline := time.Now().Add(5 * time.Second)
	n, busy := watchers()
	for busy > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		n, busy = watchers()
	}
	fmt.Printf("leaked %d\n", n)
	return nil
}

// watchers counts the goroutines in resetPendingAcksOnReconnect: those
// that wait on a nil channel, and the others.
func watchers() (nilWait, busy int) {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for _, g := range strings.Split(string(buf), "\n\n") {
		switch {
		case !strings.Contains(g, "jetstream.(*jetStream).resetPendingAcksOnReconnect"):
		case strings.Contains(g, "(nil chan)"):
			nilWait++
		default:
			busy++
		}
	}
	return nilWait, busy
}
