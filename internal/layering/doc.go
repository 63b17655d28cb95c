// Package layering holds the test that keeps the module's layers apart
// (docs/architecture.md, "Layering rules"): the core packages import no
// NATS, only the commands that embed ingest link a provider SDK, and pkg/
// depends on nothing of internal/ but the leaf helpers of internal/leaf,
// which depend on nothing of this module above them. It has no code of
// its own.
package layering
