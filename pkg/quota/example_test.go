package quota_test

import (
	"context"
	"fmt"
	"log"

	"github.com/llmworker/llmworker/pkg/natstest"
	"github.com/llmworker/llmworker/pkg/quota"
)

func Example() {
	srv, err := natstest.New(natstest.Options{Provision: true}) // LLMW_QUOTA included
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	ctx := context.Background()

	limits, err := quota.Parse([]byte(`
limits:
  - key: anthropic
    concurrent: 5
    requests_per_minute: 60
    tokens_per_minute: 200000
`))
	if err != nil {
		log.Fatal(err)
	}
	l, err := quota.New(ctx, srv.JS, quota.Config{Replica: "ingest-1", Limits: limits})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()

	lease, err := l.Acquire(ctx, quota.Request{
		Provider: "anthropic", Model: "claude-sonnet-4-5", Session: "s1", Tokens: 1200,
		Queued: func(position int) { fmt.Println("queued at", position) },
	})
	if err != nil {
		log.Fatal(err)
	}
	u, _ := l.Usage(ctx, "anthropic")
	fmt.Println("running on ingest-1:", u.Running["ingest-1"], "requests:", u.Requests, "tokens:", u.Tokens)

	lease.Release(ctx, 900) // the usage events said 900
	u, _ = l.Usage(ctx, "anthropic")
	fmt.Println("running:", len(u.Running), "requests:", u.Requests, "tokens:", u.Tokens)
	// Output:
	// running on ingest-1: 1 requests: 1 tokens: 1200
	// running: 0 requests: 1 tokens: 900
}
