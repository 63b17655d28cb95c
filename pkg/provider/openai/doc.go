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
//   - Media parts of a user message make its content an array of content
//     parts: an image is image_url (url: a data URL of the bytes, or the
//     https URL; detail is left to the API's default), a PDF is file
//     (file_data: a data URL, filename, "document.pdf" when the part has
//     none), a text file (text/*, application/json; the API has no input
//     for them) is a text part holding the file between a line
//     <file name="…" media_type="…"> and </file>, wav and mp3 audio are
//     input_audio (base64 data, format wav or mp3). Other audio, and a
//     file by URL (this API takes file bytes only), cannot be sent: Stream
//     refuses them with llm.UnsupportedContent (kind unsupported_content)
//     before any request.
//   - A tool message holds text only, so a tool result's images and files
//     go in one user message right after the tool messages of the step:
//     for each such result a text part "[images and files of the result
//     of tool call <id>]" and its media, then the text and media of the
//     user message that follows the results, if any. A result of media
//     only has the tool message text "[the images and files of this
//     result follow in a user message]".
//   - An assistant message holds text and tool calls only, so its images
//     and files go in the user turn after it (llm.MoveAssistantMedia): a
//     text part "[images and files of the assistant's message above]" and
//     the media, mapped as a user message's, at the start of the next user
//     message's content; when the assistant called tools, in the user
//     message after their tool messages, after the results' media; in a
//     user message of their own when an assistant message follows. An assistant message of media only has the content "[the
//     images and files of this message follow in a user message]". A part
//     this API cannot take is refused as above, naming the request's
//     field.
//   - A part holding only an LLMW_MEDIA ref (ingest resolves refs before
//     the call) is ErrInvalidRequest naming the field ("unresolved media
//     ref").
//   - Thinking parts are dropped: Chat Completions cannot take reasoning
//     back (use openai-responses: for reasoning models that must keep it).
//   - MaxTokens → max_completion_tokens on OpenAI's API and Azure OpenAI
//     (IsOpenAIHost; max_tokens is rejected by reasoning models there),
//     max_tokens on any other base URL (OpenAI-compatible servers such as
//     Ollama, llama.cpp and vLLM read only that), Temperature →
//     temperature, Thinking.BudgetTokens →
//     reasoning_effort (≤2048 low, ≤8192 medium, else high), and
//     stream_options.include_usage is always on.
//   - Model options (events.ModelOptions): response_format →
//     response_format ({"type":"json_schema","json_schema":{name, schema,
//     strict, description}} or {"type":"json_object"}); tool_choice →
//     tool_choice ("auto", "none", "required", or {"type":"function",
//     "function":{"name"}}); parallel_tool_calls, stop, top_p, seed,
//     presence_penalty and frequency_penalty → the fields of the same
//     name; reasoning_effort → reasoning_effort (over the thinking
//     budget's); cache_key → prompt_cache_key unless cache is false.
//     tool_choice auto or none and parallel_tool_calls are left out of a
//     request without tools, which the API refuses them in. top_k has no
//     field: it is not sent, and the stream's Warnings (llm.Warner) say
//     so. provider_options["openai"] is merged into the body last, each
//     key as a JSON Merge Patch (RFC 7396) of the adapter's value.
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
// argument deltas interleave. A call stops when the next call begins if its
// arguments are then a whole JSON value, so that a tool that may start
// early does while the next call streams (more arguments for it fail the
// stream with interleaved_tool_calls). The finish_reason stops the open
// blocks with the mapped stop reason: stop → end_turn, length → max_tokens,
// tool_calls → tool_use, content_filter → content_filter (plus an error
// event "content_filter"). A refusal (delta.refusal) is never text and never a
// silent empty answer: it becomes an error event {code: "refusal",
// message: the refusal} and stop reason refusal (on an empty text block if
// nothing else was streamed), and the stream completes. Usage maps
// prompt/completion/total tokens, cached_tokens to cache_read_input_tokens
// and reasoning_tokens.
//
// A mid-stream error (`event: error` or a chunk with an "error" object)
// aborts the open blocks and ends with an error event carrying the
// provider's code and message, then status failed; so does a stream that
// ends without a finish_reason. The request runs under an llm.Guard: a server
// silent for the idle timeout ends the stream with error idle_timeout
// instead of hanging, and a cancelled context ends it with status
// cancelled. Everything goes through llm.Normalize, which reads the stream
// inline (llm.SelfBounded).
package openai
