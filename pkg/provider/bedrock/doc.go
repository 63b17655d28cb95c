// Package bedrock is the llm.Provider for Amazon Bedrock ("bedrock:"
// models: a model id such as "anthropic.claude-sonnet-4-20250514-v1:0",
// an inference profile such as "us.anthropic.claude-sonnet-4-20250514-v1:0",
// or an ARN), built on ConverseStream of the official SDK
// (aws-sdk-go-v2, service/bedrockruntime), so one adapter serves every
// model Bedrock runs.
//
// # Configuration
//
// New(Config{}) uses the SDK's standard configuration
// (config.LoadDefaultConfig): the region from AWS_REGION (or
// AWS_DEFAULT_REGION, or the shared profile), credentials from the
// default chain (environment keys, the shared profile named by
// AWS_PROFILE, a web identity token for Kubernetes service accounts,
// container and instance metadata), and the endpoint from
// AWS_ENDPOINT_URL_BEDROCK_RUNTIME (or AWS_ENDPOINT_URL). Config fields
// override them. No region is ErrMissingRegion from New; no credentials is
// ErrMissingCredentials from Stream (kind missing_api_key).
//
// # Requests
//
// The system prompt, messages (text, images, documents, thinking with its
// signature, tool use, tool results whose content may hold text, images
// and documents), tools and tool choice (auto, required as "any", a named
// tool), max_tokens, temperature, top_p and stop map to their Converse
// fields. Tool messages become user turns and consecutive turns of one
// role are merged. Images (png, jpeg, gif, webp) and documents (pdf, csv,
// doc, docx, xls, xlsx, html, txt, md; JSON goes as txt) travel as bytes,
// a document named after its filename without the extension and with the
// characters Bedrock refuses replaced by hyphens; a media part by URL is
// refused with llm.UnsupportedContent. Only a user turn may hold images
// and documents, so an assistant message's images and files go in the
// user turn after it (llm.MoveAssistantMedia): a text block "[images and
// files of the assistant's message above]" and the image and document
// blocks, after that turn's toolResult blocks and before the rest of it
// (a user turn of their own when an assistant message follows). An
// assistant message of media only has the text "[the images and files of
// this message follow in a user message]". additionalModelRequestFields carries
// top_k, the thinking budget of Anthropic models
// ({"thinking":{"type":"enabled","budget_tokens":N}}, with maxTokens
// raised to budget + DefaultMaxTokens when the request has none), and
// provider_options["bedrock"], merged last. Cache points mark the system
// prompt, the tools and the newest message for prompt caching on the
// models that take them (Claude and Amazon Nova), unless the request's
// cache is false. Settings ConverseStream lacks (seed, presence and
// frequency penalties, reasoning effort, parallel tool calls,
// response_format, tool choice "none", thinking on a model other than
// Claude) are not sent and are reported by the stream's llm.Warner.
//
// # Stream
//
// Events follow docs/protocol.md §3 and are passed through llm.Normalize:
//
//   - text deltas open a text block (Bedrock starts only tool-use blocks);
//     contentBlockStart toolUse opens a tool_use block whose input arrives
//     in toolUse deltas;
//   - reasoningContent text is a thinking block and its signature the
//     block's stop signature; redacted reasoning is a thinking block with
//     no text whose signature is RedactedSignaturePrefix + the base64 of
//     the bytes; both are sent back unchanged on the next request;
//   - messageStop's reason is carried by the last block's stop: end_turn,
//     tool_use, max_tokens (also model_context_window_exceeded),
//     stop_sequence, and content_filter for guardrail_intervened and
//     content_filtered, which also yield error {code: "content_filter"}
//     (with the guardrail's action reason when the trace has one);
//     malformed_tool_use and malformed_model_output fail the stream
//     (codes malformed_tool_call, malformed_model_output);
//   - usage (input, output, total, cacheReadInputTokens as
//     cache_read_input_tokens, cacheWriteInputTokens as
//     cache_creation_input_tokens) comes from the metadata event;
//   - an exception inside the stream fails it: throttlingException as
//     rate_limited, modelStreamErrorException as stream_error,
//     validationException as invalid_request, serviceUnavailableException
//     as service_unavailable, internalServerException as internal_error;
//     a stream that ends before messageStop is incomplete_stream; a
//     cancelled context or IdleTimeout end it cancelled or failed.
//
// # Errors and retries
//
// Errors before the stream begins are returned by Stream: ErrInvalidRequest
// for a request that cannot be mapped, ErrRequestFailed (wrapping the SDK's
// error) when Bedrock refused it or could not be reached, classified
// (llm.ClassifyError) by the exception: ThrottlingException and
// ServiceQuotaExceededException rate_limited, ValidationException
// invalid_request, AccessDeniedException provider_auth,
// ResourceNotFoundException unknown_model, else by HTTP status. The SDK
// retries throttling, 5xx and connection errors MaxRetries times with its
// backoff; after the first event nothing is retried.
package bedrock
