package hookbridge

import (
	"errors"
	"fmt"
)

// Host failures: a command or HTTP hook that failed is answered with an
// error reply, which the turn treats as a hook failure (the hook's failure
// policy applies).
var (
	// ErrCommand: a command hook could not be run, exited with a code
	// other than 0 or 2, timed out (the process group was killed) or
	// printed something that is not a JSON response.
	ErrCommand = errors.New("hookbridge: command hook failed")

	// ErrHTTP: an HTTP hook's request failed, timed out, got a non-2xx
	// status or a body that is not a JSON response.
	ErrHTTP = errors.New("hookbridge: http hook failed")
)

// ErrConfig is matched by every *ConfigError (ParseConfig, LoadConfig).
var ErrConfig = errors.New("hookbridge: invalid config")

// ConfigError says where a config file is wrong: the line (and column) and
// the field, e.g. hooks.yaml:12:14: hooks[1].builtin.pattern: ...
type ConfigError struct {
	File   string
	Line   int
	Column int
	// Field is the path of the field, e.g. "hooks[1].timeout".
	Field   string
	Problem string
}

func (e *ConfigError) Error() string {
	loc := e.File
	if loc == "" {
		loc = "config"
	}
	if e.Line > 0 {
		loc = fmt.Sprintf("%s:%d:%d", loc, e.Line, e.Column)
	}
	if e.Field == "" {
		return loc + ": " + e.Problem
	}
	return fmt.Sprintf("%s: %s: %s", loc, e.Field, e.Problem)
}

// Is makes errors.Is(err, ErrConfig) true.
func (e *ConfigError) Is(target error) bool { return target == ErrConfig }
