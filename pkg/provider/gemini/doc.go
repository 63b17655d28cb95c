// Package gemini is the llm.Provider for the Gemini API ("gemini:" models),
// built on the official SDK's streaming call (google.golang.org/genai,
// client.Models.GenerateContentStream, BackendGeminiAPI).
//
// # Configuration
//
// New(Config{}) reads GOOGLE_API_KEY, then GEMINI_API_KEY, and
// GOOGLE_GEMINI_BASE_URL, the SDK's own variables with the SDK's precedence;
// Config fields override them. A missing key is ErrMissingAPIKey.
//
// # Requests
//
// The system prompt (systemInstruction), messages, tool definitions
// (functionDeclarations with parametersJsonSchema), max tokens
// (maxOutputTokens), temperature and thinking budget (thinkingConfig
// thinkingBudget with includeThoughts) map to generateContent. Thinking
// parts become thought parts; a part's signature goes back as the
// thoughtSignature of the same part (text, thought or functionCall).
// tool_use parts become functionCall, tool_result parts functionResponse
// ({"output": content} or {"error": content}) named after the call with
// that id. Ids the adapter synthesized (SynthesizedIDPrefix) are not sent.
// The SDK's automatic continuation is turned off, so that a request is only
// ever re-sent by the retry rules below.
//
// Image and file parts (every media type events allows, audio included)
// are inlineData {mimeType, data} parts, or fileData {mimeType, fileUri}
// for a URL, in a model turn (an assistant message) as in a user turn:
// the API takes them in both; a part with only a media ref is
// ErrInvalidRequest. A tool result's part array is a functionResponse
// with the text; its media go in the functionResponse's parts on Gemini 3
// and later (png, jpeg, webp, pdf, text/plain: multimodal function
// responses), else as parts of the same user turn right after the
// functionResponse, introduced by a text part naming the call.
//
// The model options (events.ModelOptions): response_format is
// responseMimeType application/json, with responseJsonSchema for a schema;
// tool_choice is toolConfig.functionCallingConfig (AUTO, NONE, ANY, ANY
// with allowedFunctionNames for a named tool); stop, top_p, top_k, seed,
// presence_penalty and frequency_penalty are generationConfig's
// stopSequences, topP, topK, seed, presencePenalty and frequencyPenalty.
// reasoning_effort is thinkingConfig.thinkingLevel (LOW, MEDIUM, HIGH) on
// Gemini 3 and later, else thinkingBudget BudgetLow, BudgetMedium or
// BudgetHigh; an explicit thinking budget wins. parallel_tool_calls false
// (the API has no such setting), a seed beyond 32 bits and a
// reasoning_effort beside an explicit budget are not sent and the stream
// reports them (llm.Warner). provider_options["gemini"] is applied to the
// request body as a JSON Merge Patch (genai's
// HTTPOptions.ExtrasRequestProvider): objects merge key by key, null
// removes a field. The
// Gemini API caches prompt prefixes on its own; cache settings send
// nothing, and cachedContentTokenCount is the usage's
// cache_read_input_tokens.
//
// # Stream
//
// Gemini has no block events: consecutive text parts form a text block,
// thought parts a thinking block, and every functionCall part a tool_use
// block of its own, so parallel calls stay apart. Calls without an id get a
// unique synthesized one. Arguments streamed as partialArgs/willContinue
// (Vertex AI) are assembled and sent as one input_json delta when the call
// ends. A thoughtSignature is the stop signature of the block of its part;
// a part with a second signature starts a new block. The finish reason is
// carried by the last block's stop: STOP is end_turn, or tool_use when the
// answer made calls; MAX_TOKENS is max_tokens; SAFETY, RECITATION,
// BLOCKLIST, PROHIBITED_CONTENT, SPII (and the image variants) are
// content_filter with error {code: "content_filter"}; MALFORMED_FUNCTION_CALL
// and other failures are error {code: "malformed_function_call", ...} with
// the finishMessage, and status failed. promptFeedback.blockReason is error
// {code: "prompt_blocked"} and failed. Usage comes from the last
// usageMetadata: input_tokens = promptTokenCount, output_tokens =
// candidatesTokenCount + thoughtsTokenCount, reasoning_tokens =
// thoughtsTokenCount, cache_read_input_tokens = cachedContentTokenCount,
// total_tokens = totalTokenCount. CRLF-separated SSE (the real wire
// format) is read by the SDK. Mid-stream errors, a stream without a finish
// reason, cancel and IdleTimeout end the stream with block.abort for open
// blocks. The result is passed through llm.Normalize.
//
// # Errors and retries
//
// genai retries only with explicit retry options and ignores Retry-After,
// so the adapter retries in its HTTP transport: 408, 429, 5xx and connection
// errors, MaxRetries times, waiting as Retry-After(-Ms) says or with
// exponential backoff. Stream reads the first chunk before it returns, so
// a rejected request is its error: ErrRequestFailed (wrapping genai.APIError)
// or ErrInvalidRequest. After the first chunk nothing is retried.
package gemini
