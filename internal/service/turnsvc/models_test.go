package turnsvc_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llmworker/llmworker/internal/service"
	"github.com/llmworker/llmworker/internal/service/turnsvc"
	"github.com/llmworker/llmworker/pkg/natstest"
)

// A models file that cannot be used stops the service from starting,
// and the error names the flag, the file, the key and the field.
func TestBadModelsFileIsAUsageError(t *testing.T) {
	srv := natstest.Start(t, natstest.Options{})
	dir := t.TempDir()
	bad := filepath.Join(dir, "models.json")
	if err := os.WriteFile(bad, []byte(`{"models":{"azure:my-4o":{"context_window":4096,"max_output_tokens":16384}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]string{
		bad:                               `models["azure:my-4o"].context_window (4096) must be above max_output_tokens (16384)`,
		filepath.Join(dir, "absent.yaml"): "no such file",
	} {
		svc := &turnsvc.Service{Options: turnsvc.Options{Models: file}}
		st, err := svc.Start(context.Background(), service.Env{NC: srv.NC, Instance: "turn-1", Log: quiet()})
		if err == nil {
			_ = st.Stop(context.Background())
			t.Fatalf("%s: started", file)
		}
		if !errors.Is(err, service.ErrUsage) || !strings.Contains(err.Error(), "--models") || !strings.Contains(err.Error(), want) {
			t.Fatalf("%s: err %v, want --models and %q", file, err, want)
		}
	}
}

// A --compaction setting that is not a compaction setting stops the
// service from starting, naming the flag and what was wrong.
func TestBadCompactionIsAUsageError(t *testing.T) {
	srv := natstest.Start(t, natstest.Options{})
	for setting, want := range map[string]string{
		`{"threshold":1.5}`: "compaction.threshold",
		`{"treshold":0.7}`:  `unknown field "treshold"`,
		`0.7`:               "not a compaction setting",
		`{"target":0.9} {}`: "more than one JSON value",
	} {
		svc := &turnsvc.Service{Options: turnsvc.Options{Compaction: setting}}
		st, err := svc.Start(context.Background(), service.Env{NC: srv.NC, Instance: "turn-1", Log: quiet()})
		if err == nil {
			_ = st.Stop(context.Background())
			t.Fatalf("%s: started", setting)
		}
		if !errors.Is(err, service.ErrUsage) || !strings.Contains(err.Error(), "--compaction") || !strings.Contains(err.Error(), want) {
			t.Fatalf("%s: err %v, want --compaction and %q", setting, err, want)
		}
	}
}
