// Package replay runs the whole llmworker pipeline without a model account:
// a provider for ingest (model prefix "replay:") that plays recorded
// provider streams from internal/leaf/fixtures through the REAL provider
// adapters, served by an in-process HTTP server, plus demo tools with the
// names the recordings call.
//
// It is what `llmworker chat --replay` runs, and it is always labelled on
// screen as Label: a replay of recorded provider streams, not a live model.
//
// # Scenarios
//
// Each scenario (replay:anthropic, replay:openai, replay:openai-responses,
// replay:gemini) has two steps: step 1 is a recorded tool-call stream, whose
// tool then runs for real on toolexec (demo tools from Tools, answering
// canned data marked as demo data), step 2 a recorded text stream, with
// thinking where the provider format records it. Which step a request gets
// is read from the request itself (no tool result since the last user text:
// step 1; otherwise step 2), so concurrent turns and multi-turn sessions
// each see the whole scenario.
//
// # Server
//
// Server is a small HTTP server on 127.0.0.1 that answers every request with
// the fixture named by the X-Llmw-Replay-Fixture header (set by the
// http.Client the adapters are given), whatever the path, so every SDK's
// URL layout works. Config.Pace makes the replay providers stream each
// delta at a model's speed (the commands' --replay-pace, DefaultPace per
// token unless set), so a person watching sees the answer being written.
// The recordings keep no time of their own (internal/leaf/fixtures/MANIFEST.md:
// response bodies only, no per-chunk timestamps), so that rate is their
// timing; a benchmark that needs a block to end at a given moment scripts
// its stream with llmtest.TimedStep instead.
//
// # Use
//
//	srv, _ := replay.NewServer(replay.Config{})
//	defer srv.Close()
//	ing, _ := ingest.New(nc, ingest.Config{Providers: map[string]ingest.Factory{replay.Prefix: srv.Factory()}})
//	exec.Register(demotools.Tools()...)
package replay
