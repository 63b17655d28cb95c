// Package childenv builds the environment of a program llmworker starts
// from a user's configuration — a command hook (pkg/hookbridge), an MCP
// stdio server (pkg/mcp): what programs need to run, and nothing secret
// (no provider keys, no NATS credentials).
package childenv

import "slices"

// Inherited are the variables of llmworker's environment a child
// inherits: PATH, HOME, the user, the locale, the time zone and the
// temporary directory. Anything else it needs comes from its config.
var Inherited = []string{"PATH", "HOME", "USER", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR"}

// Build returns a child's environment: each Inherited variable lookup
// finds, then extra. It is never nil: an exec.Cmd with a nil Env would
// inherit everything. It is clipped: a caller that appends per-run
// variables to the one result from several goroutines gets copies.
func Build(lookup func(string) (string, bool), extra map[string]string) []string {
	env := []string{}
	for _, k := range Inherited {
		if v, ok := lookup(k); ok {
			env = append(env, k+"="+v)
		}
	}
	for k, v := range extra {
		env = append(env, k+"="+v)
	}
	return slices.Clip(env)
}
