// Package llmtest is the test kit of package llm, as net/http/httptest is
// net/http's: Scripted, a provider that plays scripted streams (text,
// thinking, tool calls, failures, a model that hangs), and the helpers to
// build its steps. It stands in for a model in examples, tests and
// benchmarks of everything above the provider interface.
package llmtest

import "errors"

// ErrScriptExhausted is returned by Scripted.Stream when it is called more
// often than it has steps: the code under test made more model calls than
// the test expected.
var ErrScriptExhausted = errors.New("llmtest: scripted provider has no more steps")
