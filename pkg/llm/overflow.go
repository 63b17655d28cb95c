package llm

import "strings"

// CodeContextOverflow is the code of a stream's error event (and of a
// failed turn) when the request's context did not fit the model's
// window: the same string as KindContextOverflow.
const CodeContextOverflow = string(KindContextOverflow)

// overflowCodes are the error codes providers give a context that does
// not fit: OpenAI's and Azure OpenAI's (Chat Completions and Responses,
// in the error body and in a Responses stream's response.failed), and
// llama.cpp server's error type.
var overflowCodes = []string{"context_length_exceeded", "exceed_context_size_error", CodeContextOverflow}

// overflowPhrases are the messages, lower-cased, that providers give a
// context that does not fit, where their code is a generic one:
//
//   - Anthropic (400 invalid_request_error, also through Bedrock and
//     Vertex): "prompt is too long: 208656 tokens > 200000 maximum",
//     "input length and `max_tokens` exceed context limit: 189136 +
//     20000 > 204648"
//   - Gemini (400 INVALID_ARGUMENT): "The input token count (1200293)
//     exceeds the maximum number of tokens allowed (1048576)."
//   - Bedrock (ValidationException): "Input is too long for requested
//     model.", "too many input tokens"
//   - OpenAI, vLLM and other compatible servers: "This model's maximum
//     context length is 32768 tokens. However, you requested 33000
//     tokens …"; GPT-5: "Input tokens exceed the configured limit of
//     272000 tokens."; Responses: "Your input exceeds the context window
//     of this model."
//   - llama.cpp server: "the request exceeds the available context size";
//     Ollama: "input length exceeds the context length"
var overflowPhrases = []string{
	"prompt is too long",
	"exceed context limit",
	"input token count",
	"input is too long for requested model",
	"too many input tokens",
	"maximum context length is",
	"input tokens exceed the configured limit",
	"exceeds the context window",
	"exceeds the available context size",
	"input length exceeds the context length",
}

// IsContextOverflow reports whether a provider's error code or message
// says that the request's context does not fit the model's window (see
// overflowCodes and overflowPhrases for the forms recognised). Adapters
// call it on the code and message of an error answer and of a stream's
// error event, and report KindContextOverflow (CodeContextOverflow)
// when it holds.
func IsContextOverflow(code, message string) bool {
	c := strings.ToLower(code)
	for _, oc := range overflowCodes {
		if c == oc {
			return true
		}
	}
	if message == "" {
		return false
	}
	m := strings.ToLower(message)
	for _, p := range overflowPhrases {
		if strings.Contains(m, p) {
			// "input token count" alone is too weak: Gemini's form says
			// it exceeds the maximum.
			if p == "input token count" && !strings.Contains(m, "exceeds the maximum") {
				continue
			}
			return true
		}
	}
	return false
}

// MarkOverflow sets e's kind to KindContextOverflow when code or message
// says the context did not fit (IsContextOverflow), and returns e.
func (e *APIError) MarkOverflow(code, message string) *APIError {
	if e != nil && IsContextOverflow(code, message) {
		e.ErrKind = KindContextOverflow
	}
	return e
}
