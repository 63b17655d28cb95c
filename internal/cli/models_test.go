package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// chat's embedded turn service reads --models and $LLMW_MODELS: a file
// that breaks a rule stops chat with an error naming the key and field.
func TestChatRefusesABadModelsFile(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "models.yaml")
	if err := os.WriteFile(bad, []byte("models:\n  replay:anthropic:\n    context_window: 100\n    max_output_tokens: 4096\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, r := range map[string]result{
		"flag": runCLI(t, Env{}, "chat", "--replay", "--replay-pace", "0", "--models", bad, "q"),
		"env":  runCLI(t, Env{Getenv: envOf("LLMW_MODELS", bad)}, "chat", "--replay", "--replay-pace", "0", "q"),
	} {
		want := `models["replay:anthropic"].context_window (100) must be above max_output_tokens (4096)`
		if r.code == 0 || !strings.Contains(r.stderr, "--models") || !strings.Contains(r.stderr, want) {
			t.Errorf("%s: exit %d, stderr %q, want --models and %q", name, r.code, r.stderr, want)
		}
	}
}
