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
//   - Media parts of a user message make its content a list: an image is
//     input_image (image_url: a data URL of the bytes or the https URL,
//     detail "auto"), a PDF is input_file (file_data: a data URL, and
//     filename, "document.pdf" when the part has none; or file_url), a text
//     file (text/*, application/json) with inline bytes is input_text
//     holding the file between a line <file name="…" media_type="…"> and
//     </file>, and one by URL is input_file with file_url. Audio cannot be
//     sent (the API takes none): Stream refuses it with
//     llm.UnsupportedContent (kind unsupported_content) before any request.
//   - An assistant message holds output text only, so its images and files
//     go in the user turn after it (llm.MoveAssistantMedia): an input_text
//     "[images and files of the assistant's message above]" and the media,
//     mapped as a user message's, at the start of the next user message,
//     or in a user message right after the function_call_output items of
//     the assistant's calls, or in a user message of their own when an
//     assistant message follows. An assistant message of media only is the
//     text "[the images and files of this message follow in a user
//     message]". A part this API cannot take is refused as above, naming
//     the request's field.
//   - A tool result with images or files is a function_call_output whose
//     output is an array of input_text, input_image and input_file items,
//     mapped as above, in the result's order; a text-only result's output
//     is its text.
//   - A part holding only an LLMW_MEDIA ref (ingest resolves refs before
//     the call) is ErrInvalidRequest naming the field ("unresolved media
//     ref").
//   - Assistant parts keep their order: text → an assistant message,
//     tool_use → a function_call item (call_id, name, arguments, and the
//     item id from its signature), thinking → a reasoning item rebuilt from
//     its signature (id, encrypted_content, summary parts). Thinking without
//     a signature of this adapter (another provider's) is dropped: the API
//     accepts only its own reasoning items. A provider-native compaction
//     (llm.NativeCompactionData) of this adapter is a compaction input
//     item (id, encrypted_content); another provider's is dropped.
//   - Compaction (provider-native compaction) → context_management
//     [{"type":"compaction","compact_threshold":trigger}].
//   - Tools → function tools with strict: false (the API's default strict
//     mode would reject ordinary schemas). MaxTokens → max_output_tokens.
//   - Thinking.BudgetTokens → reasoning.effort (≤2048 low, ≤8192 medium,
//     else high), and reasoning_effort → reasoning.effort (over the
//     budget's); either way with reasoning.summary "auto" and include
//     ["reasoning.encrypted_content"], so reasoning can round-trip.
//   - Model options (events.ModelOptions): response_format → text.format
//     ({"type":"json_schema", name, schema, strict, description} or
//     {"type":"json_object"}); tool_choice → tool_choice ("auto", "none",
//     "required", or {"type":"function","name"}); parallel_tool_calls and
//     top_p → the fields of the same name; cache_key → prompt_cache_key
//     unless cache is false. tool_choice auto or none and
//     parallel_tool_calls are left out of a request without tools. stop,
//     seed, presence_penalty, frequency_penalty and top_k have no field on
//     this API: they are not sent, and the stream's Warnings (llm.Warner)
//     name them. provider_options["openai-responses"] is merged into the
//     body last, each key as a JSON Merge Patch (RFC 7396) of the
//     adapter's value.
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
//   - compaction: at its output_item.done, a thinking block without text
//     with signature llm.NativeCompactionSignature of
//     {"t":"openai.compaction","id","encrypted_content"}; none for an item
//     without encrypted content.
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
// idle_timeout (llm.Guard). Everything goes through llm.Normalize, which
// reads the stream inline (llm.SelfBounded).
package openairesponses
