package servicetest_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/llmworker/llmworker/internal/service/servicetest"
)

func TestSyncBufferConcurrent(t *testing.T) {
	var b servicetest.SyncBuffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				_, _ = b.Write([]byte("x"))
				_ = b.String()
			}
		})
	}
	wg.Wait()
	if got := b.String(); got != strings.Repeat("x", 800) {
		t.Fatalf("len %d", len(got))
	}
}

func ExampleSyncBuffer() {
	var b servicetest.SyncBuffer
	fmt.Fprint(&b, "hello ")
	fmt.Fprint(&b, "world")
	fmt.Println(b.String())
	// Output: hello world
}
