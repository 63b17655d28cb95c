// Package openairesponses is the llm.Provider for the OpenAI Responses API
// (model prefix "openai-responses:"), built on the official SDK
// github.com/openai/openai-go/v3 (Responses.NewStreaming). Configuration,
// retries and error sentinels are those of pkg/provider/openai (Config is
// openai.Config).
//
// # Request mapping
//
// Requests are stateless (store: false): the whole transcript goes as input
// items, in order.
//
//   - System → instructions. User text → a user message; tool_result parts
//     → function_call_output items (call_id, output).
//   - Assistant parts keep their order: text → an assistant message,
//     tool_use → a function_call item (call_id, name, arguments, and the
//     item id from its signature), thinking → a reasoning item rebuilt from
//     its signature (id, encrypted_content, summary parts). Thinking without
//     a signature of this adapter (another provider's) is dropped: the API
//     accepts only its own reasoning items.
//   - Tools → function tools with strict: false (the API's default strict
//     mode would reject ordinary schemas). MaxTokens → max_output_tokens.
//   - Thinking.BudgetTokens → reasoning.effort (≤2048 low, ≤8192 medium,
//     else high), reasoning.summary "auto" and include
//     ["reasoning.encrypted_content"], so reasoning can round-trip.
//
// # Stream mapping
//
// Every output item is a block with its own index (docs/protocol.md §3):
//
//   - reasoning: a thinking block; reasoning summary text deltas are its
//     thinking deltas, summary parts separated by a blank line ("\n\n"). It
//     stops at output_item.done with signature
//     {"t":"openai.reasoning","id","encrypted_content","summary":[...]}.
//   - function_call: a tool_use block named from its output_item.added
//     (id = call_id), argument deltas as input_json (the complete arguments
//     of ...arguments.done / output_item.done when none were streamed);
//     signature {"t":"openai.function_call","id"}.
//   - message: each output_text part is a text block.
//
// Text and tool_use blocks stop at the terminal event, which gives the stop
// reason: response.completed → end_turn, or tool_use when the response has
// function calls; response.incomplete → max_tokens (max_output_tokens) or
// content_filter (with an error event "content_filter"). A refusal
// (response.refusal.delta) is an error event {code: "refusal"} and stop
// reason refusal, never an empty answer. Usage maps input/output/total
// tokens, cached_tokens, cache_write_tokens and reasoning_tokens. An error
// event or response.failed aborts the open blocks and ends with an error
// event (the API's code and message) and status failed; a stream that ends
// before its terminal event fails with code incomplete_stream. A server
// silent for the configured idle timeout ends the stream with error
// idle_timeout (openai.Guard). Everything goes through llm.Normalize, which
// reads the stream inline (llm.SelfBounded).
package openairesponses
