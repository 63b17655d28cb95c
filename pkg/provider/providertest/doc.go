// Package providertest is test support for the provider adapters
// (pkg/provider/...): a replay HTTP server that answers with recorded
// provider streams so that an adapter's official SDK parses real wire data.
//
// # Replay server
//
// NewServer starts an httptest server that plays a script of Responses, one
// per HTTP request (the last one repeats once the script is used up), and
// records every request (method, path, headers, body) so that tests can
// assert on the JSON the adapter sent:
//
//	srv := providertest.NewServer(t, providertest.SSE(body))
//	p, _ := openai.New(openai.Config{APIKey: "k", BaseURL: srv.URL()})
//	...
//	req := srv.LastRequest() // req.Body is the JSON the SDK sent
//
// A Response can be an error status with a Retry-After header (Status), so
// retry behaviour before the first byte can be tested, and it can stall after
// its body (Response.Stall) to test idle timeouts: a stalled response keeps
// the connection open until the client goes away or the server is closed.
//
// # Fixtures
//
// The recorded streams live in internal/leaf/fixtures, described by its
// MANIFEST.md. FixturesDir finds it (LLMW_FIXTURES, or an
// "internal/leaf/fixtures", "testdata/fixtures" or "fixtures" directory in the
// working directory or any parent). LoadFixture returns a file's bytes as the SSE body the provider
// sent: *.sse files as they are, *.chunks.jsonl files rebuilt with the rules
// of the MANIFEST for the wire format of their directory (ChunksToSSE; the
// bedrock ones framed in AWS's binary event stream by EventStream, served
// with EventStreamResponse). ServiceAccountFile writes a Google
// service-account file whose token endpoint is a local server, for the
// Vertex AI credential path.
//
// # Shared adapter test helpers
//
// The adapter packages' tests share their checks and folds from here rather
// than each keeping a copy: MustRun and MustCollect read a stream to its end
// (MustRun also checks it with llm.CheckWellFormed and WellFormed),
// StrictWellFormed adds the test's own statement of docs/protocol.md §3 to
// llm.CheckWellFormed, Summarize folds events into a Summary to compare with
// what a fixture says, CollectCancelled cancels mid-stream and checks the
// stream ends cancelled, FixedTransport/FixedClient serve one body from
// memory (fuzzing, benchmarks), CheckFuzzInput, FuzzServer and
// CheckMutatedFixtures are the bodies of fuzz and mutation tests,
// BenchmarkStream and BenchmarkSDK the bodies of the adapter and SDK
// baseline benchmarks, and MustNew, SimpleRequest, ClosedAddr, AssertJSON,
// LeakOptions, Int64, EqualInt64, FormatInt64 and UsageJSON the small
// pieces around them.
//
// # Concurrency
//
// A Server is safe for concurrent use; SetScript may be called between
// requests, e.g. once per fuzz input.
package providertest
