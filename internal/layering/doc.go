// Package layering holds the test that keeps the module's layers apart
// (docs/architecture.md, "Layering rules"): the core packages import no
// NATS, and only the commands that embed ingest link a provider SDK. It has
// no code of its own.
package layering
