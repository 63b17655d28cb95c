package cli

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
)

// defaultStoreDirHelp says in --help where defaultStoreDir puts the store.
const defaultStoreDirHelp = "$XDG_STATE_HOME/llmworker/nats, else ~/.local/state/llmworker/nats; on macOS and Windows the user config directory's llmworker/nats"

// defaultStoreDir is where `up` keeps its embedded NATS store unless told
// otherwise: the user's state directory (XDG Base Directory spec), so that
// a turn in flight at shutdown is resumed by the next `up` instead of
// being deleted with a temporary directory.
func defaultStoreDir(env *Env) (string, error) {
	if d := env.getenv("XDG_STATE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "llmworker", "nats"), nil
	}
	if runtime.GOOS == "darwin" || runtime.GOOS == "windows" {
		d, err := os.UserConfigDir()
		if err != nil {
			return "", err
		}
		return filepath.Join(d, "llmworker", "nats"), nil
	}
	home := env.getenv("HOME")
	if home == "" {
		var err error
		if home, err = os.UserHomeDir(); err != nil {
			return "", err
		}
	}
	if !filepath.IsAbs(home) {
		return "", errors.New("$HOME is not an absolute path")
	}
	return filepath.Join(home, ".local", "state", "llmworker", "nats"), nil
}
