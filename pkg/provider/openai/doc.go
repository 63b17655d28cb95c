// Package openai is the llm.Provider for the OpenAI Chat Completions API
// (model prefix "openai:"), and for every OpenAI-compatible server, built on
// the official SDK github.com/openai/openai-go/v3 (Chat.Completions.
// NewStreaming). It also holds what the Responses adapter
// (pkg/provider/openairesponses) shares with it: Config, ClientOptions,
// the error sentinels and the Emitter.
//
// # Configuration
//
// New(Config{}) works when $OPENAI_API_KEY is set; $OPENAI_BASE_URL,
// $OPENAI_ORG_ID and $OPENAI_PROJECT_ID are read by the SDK as well. A
// missing key is ErrMissingAPIKey at New. Requests that fail before the
// first byte (connection errors, 408, 409, 429, 5xx) are retried by the SDK
// MaxRetries times, waiting as Retry-After / Retry-After-Ms ask or backing
// off exponentially; when they are used up Stream returns ErrRequestFailed
// naming the status and the API's message.
//
// # Request mapping
//
//   - System becomes the first "system" message.
//   - Text parts become the message content; assistant tool_use parts
//     become tool_calls (arguments as a JSON string); tool_result parts
//     become one "tool" message each (tool_call_id), sent before any text
//     of the same message. is_error has no field on this API and is not
//     sent.
//   - Thinking parts are dropped: Chat Completions cannot take reasoning
//     back (use openai-responses: for reasoning models that must keep it).
//   - MaxTokens → max_completion_tokens (max_tokens is rejected by
//     reasoning models), Temperature → temperature, Thinking.BudgetTokens →
//     reasoning_effort (≤2048 low, ≤8192 medium, else high), and
//     stream_options.include_usage is always on.
//
// # Stream mapping
//
// Chat sends no block boundaries, so the adapter makes them (docs/protocol.md §3):
// a block starts at its first non-empty delta; text and reasoning (the
// delta.reasoning / delta.reasoning_content of compatible servers such as
// Groq, vLLM, OpenRouter) are one block each until the other kind or a tool
// call interrupts; each tool call index is its own tool_use block with its
// own index, opened when its name is known (a call without id gets
// "call_" + random hex), so parallel calls stay apart even when their
// argument deltas interleave. The finish_reason stops the open blocks with
// the mapped stop reason: stop → end_turn, length → max_tokens, tool_calls
// → tool_use, content_filter → content_filter (plus an error event
// "content_filter"). A refusal (delta.refusal) is never text and never a
// silent empty answer: it becomes an error event {code: "refusal",
// message: the refusal} and stop reason refusal (on an empty text block if
// nothing else was streamed), and the stream completes. Usage maps
// prompt/completion/total tokens, cached_tokens to cache_read_input_tokens
// and reasoning_tokens.
//
// A mid-stream error (`event: error` or a chunk with an "error" object)
// aborts the open blocks and ends with an error event carrying the
// provider's code and message, then status failed; so does a stream that
// ends without a finish_reason. The request runs under a Guard: a server
// silent for the idle timeout ends the stream with error idle_timeout
// instead of hanging, and a cancelled context ends it with status
// cancelled. Everything goes through llm.Normalize, which reads the stream
// inline (llm.SelfBounded).
package openai
