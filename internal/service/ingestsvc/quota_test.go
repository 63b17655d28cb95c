package ingestsvc_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/llmworker/llmworker/internal/replay"
	"github.com/llmworker/llmworker/internal/service"
	"github.com/llmworker/llmworker/internal/service/ingestsvc"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/ingest"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/natstest"
	"github.com/llmworker/llmworker/pkg/quota"
)

// --quota-config holds ingest's calls to the file's limits and follows
// the file when it changes.
func TestQuotaConfigFile(t *testing.T) {
	srv := natstest.Start(t, natstest.Options{Provision: true})
	ctx := natstest.Context(t)
	file := filepath.Join(t.TempDir(), "limits.yaml")
	write := func(body string) {
		t.Helper()
		// A later modification time than the file had, whatever the
		// file system's resolution.
		if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		future := time.Now().Add(time.Duration(len(body)) * time.Second)
		_ = os.Chtimes(file, future, future)
	}
	write("limits: [{key: replay, concurrent: 2}]\n")
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	svc := &ingestsvc.Service{Options: ingestsvc.Options{Replay: true, QuotaConfig: file, QuotaReload: 20 * time.Millisecond}}
	stop, err := svc.Start(ctx, service.Env{NC: srv.NC, Instance: "i1", Log: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stop.Stop(context.Background()) })

	l, err := quota.New(ctx, srv.JS, quota.Config{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	client := ingest.NewClient(srv.Connect(t), ingest.ClientOptions{})
	t.Cleanup(func() { _ = client.Close() })
	call := func() {
		t.Helper()
		s, err := client.Stream(ctx, &llm.Request{Model: replay.Scenarios()[0].ModelString(), Messages: []events.Message{events.UserText("hi")}})
		if err != nil {
			t.Fatal(err)
		}
		for s.Next() {
		}
		_ = s.Close()
	}
	requests := func() int64 {
		t.Helper()
		u, err := l.Usage(ctx, "replay")
		if err != nil {
			t.Fatal(err)
		}
		return u.Requests
	}
	call()
	if n := requests(); n != 1 {
		t.Fatalf("the limit replay counted %d requests after one call, want 1", n)
	}
	// Another provider's limit only: replay calls are not counted.
	write("limits: [{key: openai, concurrent: 2}]\n")
	natstest.Eventually(t, "the changed file", func() bool {
		before := requests()
		call()
		return requests() == before
	})
	// A calm check that the count stays.
	before := requests()
	call()
	if n := requests(); n != before {
		t.Fatalf("replay calls still counted (%d, then %d) under limits without replay", before, n)
	}
}

func TestQuotaWithoutBucket(t *testing.T) {
	srv := natstest.Start(t, natstest.Options{})
	svc := &ingestsvc.Service{Options: ingestsvc.Options{Quota: true}}
	_, err := svc.Start(natstest.Context(t), service.Env{NC: srv.NC, Instance: "i1", Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if !errors.Is(err, quota.ErrNotProvisioned) {
		t.Fatalf("start without LLMW_QUOTA: %v, want ErrNotProvisioned", err)
	}
}
