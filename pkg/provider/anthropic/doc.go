// Package anthropic is the llm.Provider for the Anthropic Messages API
// ("anthropic:" models), built on the official SDK's streaming call
// (anthropic-sdk-go, client.Messages.NewStreaming).
//
// # Configuration
//
// New(Config{}) reads ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL, the SDK's own
// variables; Config fields override them. A missing key is ErrMissingAPIKey.
// The SDK's profile and federation credential chain is not used.
//
// # Requests
//
// The system prompt, messages (text, thinking with its signature, tool_use,
// tool_result), tool definitions, max_tokens (DefaultMaxTokens when unset),
// temperature and thinking budget (thinking.budget_tokens) map to their
// Messages API fields. Tool messages become user turns, and consecutive
// turns of one role are merged. A thinking part whose signature starts with
// RedactedSignaturePrefix (or that is marked Redacted) is sent back as a
// redacted_thinking block; tool_use parts with a server tool id
// ("srvtoolu_...") as server_tool_use, and tool_result parts of an
// assistant message as the server tool result block they carry.
//
// A request's Compaction (provider-native compaction) is the
// compact_20260112 context-management edit under the compact-2026-01-12
// beta, sent with the beta's SDK types through raw-field options (the SDK
// has them on its beta Messages API only); its trigger is raised to
// MinCompactionTrigger at least. The answer's compaction block is a
// thinking block without text whose stop signature is
// llm.NativeCompactionSignature of the block as received; a thinking
// part with such a signature goes back as that block, verbatim, under
// the beta's header whether or not the request asks to compact. The
// tokens of usage.iterations entries of type compaction are added to the
// call's usage.
//
// Image parts are image blocks (source base64 or url), PDF file parts
// document blocks (base64 or url) and text files (text/*,
// application/json) plain-text documents, with the file name as the title;
// a tool_result's part array is its content of text, image and document
// blocks. Audio, and text files by URL, are refused before any I/O with
// llm.UnsupportedContent; a part with only a media ref is ErrInvalidRequest.
// An assistant turn takes no image or document blocks, so an assistant
// message's images and files go in the user turn after it
// (llm.MoveAssistantMedia): a text block "[images and files of the
// assistant's message above]" and the media blocks, after that turn's
// tool_result blocks and before the rest of it (a user turn of their own
// when an assistant message follows). An assistant message of media only
// has the text "[the images and files of this message follow in a user
// message]".
//
// The model options (events.ModelOptions): stop is stop_sequences, top_p
// and top_k are themselves; tool_choice is tool_choice (auto, none,
// required as any, a named tool as tool) and parallel_tool_calls false
// its disable_parallel_tool_use. reasoning_effort is adaptive thinking with
// output_config.effort on Claude 4.6 and later, else a thinking budget of
// BudgetLow, BudgetMedium or BudgetHigh tokens (bounded by an explicit
// max_tokens; a default one is raised to the budget plus
// DefaultMaxTokens, on adaptive models too); an explicit thinking budget
// wins. Without tools, no tool_choice is sent for auto, none or
// parallel_tool_calls. seed, presence_penalty
// and frequency_penalty do not exist in the Messages API: they are not
// sent, and the stream reports them (llm.Warner), as it does a
// reasoning_effort it could not apply. provider_options["anthropic"] is
// applied to the body as a JSON Merge Patch (option.WithJSONSet and
// WithJSONDel): objects merge key by key, null removes a field.
//
// response_format json_schema (strict) is output_config.format on Claude
// 4.1 and later, its schema transformed by the SDK for structured outputs
// (anthropic.BetaJSONSchemaOutputFormat); a root $ref into the schema's
// own definitions is replaced by the definition it names. Elsewhere, and for type json or strict false, it is a
// tool named after the format (input_schema: the schema, or
// {"value": schema}, definitions kept at the root, when its root is not an
// object) that the model is made
// to call: tool_choice names it when the request has no other tool, is
// any when it has others, auto when thinking is on (the API refuses a
// forced tool then). The stream turns that call back into the answer: a
// text block of the call's input (the value, when wrapped), and end_turn
// when it was the only call.
//
// Prompt caching is on unless ModelOptions.Cache is false: cache_control
// breakpoints on the last tool definition, the system prompt, the newest
// message's last block and the last block of the message before the
// newest assistant message (where the previous request of a tool loop
// ended), at most MaxBreakpoints; a thinking block cannot carry one, so
// the block before it does.
//
// # Stream
//
// Events follow docs/protocol.md §3 and are passed through llm.Normalize:
//
//   - text, thinking and tool_use blocks map one to one; server_tool_use is
//     a tool_use block with server: true, and a server tool's result
//     (web_search_tool_result, ...) a tool_result block whose text is the
//     raw result block JSON, so that it round-trips;
//   - signature_delta becomes the thinking block's stop signature; a
//     redacted_thinking block is a thinking block with no text whose
//     signature is RedactedSignaturePrefix + the opaque data;
//   - every block's stop goes out when its content_block_stop arrives, with
//     a null stop reason: Anthropic sends the stop reason after the blocks
//     (message_delta), and the completed status carries it (end_turn,
//     max_tokens, stop_sequence, tool_use, pause_turn, refusal); a
//     response without any block gets an empty text block whose stop
//     carries it too;
//   - a refusal also yields error {code: "refusal"} with the stop_details
//     explanation: never a silent empty answer;
//   - usage (input, output, cache read and creation, thinking tokens as
//     reasoning_tokens) is sent once message_delta arrives;
//   - an error event mid-stream, a stream that ends before message_stop, a
//     cancelled context or IdleTimeout end the stream (failed with an error
//     event, or cancelled) with block.abort for open blocks.
//
// # Errors and retries
//
// Errors before the stream begins are returned by Stream: ErrInvalidRequest
// for a request that cannot be mapped, ErrRequestFailed (wrapping the SDK's
// *anthropic.Error) when the API rejected it or could not be reached. The
// SDK retries 408, 409, 429, 5xx and connection errors MaxRetries times,
// waiting as Retry-After(-Ms) says. After the first event nothing is
// retried.
package anthropic
