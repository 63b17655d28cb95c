package providertest

import "errors"

var (
	// ErrFixturesNotFound is returned by FixturesDir (and so by LoadFixture
	// and Fixtures) when neither LLMW_FIXTURES nor a fixture directory in the
	// working directory or one of its parents exists.
	ErrFixturesNotFound = errors.New("providertest: fixture directory not found")

	// ErrUnknownFormat is returned by ChunksToSSE and LoadFixture when a
	// .chunks.jsonl file's wire format is not known (it is taken from the
	// name of the file's directory, see FormatOf).
	ErrUnknownFormat = errors.New("providertest: unknown wire format")

	// ErrBadChunk is returned by ChunksToSSE when a line of a Responses or
	// Anthropic chunk file is not a JSON object with a string "type", and
	// by EventStream when a line of a Bedrock chunk file is not a JSON
	// object with one key.
	ErrBadChunk = errors.New("providertest: bad chunk line")
)
