package gateway_test

import (
	"os"
	"testing"
)

// go test shows a skipped test only with -v, so a CI runner without
// Chromium would pass without ever running the browser test: in CI its
// absence fails here instead (.ci/run installs Chromium).
func TestBrowserRunsInCI(t *testing.T) {
	if os.Getenv("CI") == "" {
		t.Skip("not in CI: without Chromium the browser test skips (go test -v says so)")
	}
	if chromium() == "" {
		t.Fatal("CI without Chromium: the web UI's browser test would be skipped (apt-get install chromium)")
	}
}
