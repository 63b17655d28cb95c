package bedrock

import "errors"

var (
	// ErrMissingRegion is returned by New when no AWS region is configured
	// (Config.Region, AWS_REGION, AWS_DEFAULT_REGION or the shared
	// profile's region).
	ErrMissingRegion = errors.New("bedrock: missing AWS region (set Config.Region or AWS_REGION)")

	// ErrMissingCredentials is returned by Provider.Stream when the SDK's
	// credential chain (environment, shared profile, web identity, instance
	// metadata) found no credentials.
	ErrMissingCredentials = errors.New("bedrock: no AWS credentials found")

	// ErrInvalidRequest is returned by Provider.Stream, before any I/O,
	// when the completion request cannot be mapped to ConverseStream (a
	// tool_use input or tool schema that is not JSON, a media part without
	// its bytes, provider_options that are not a JSON object, a nil
	// request).
	ErrInvalidRequest = errors.New("bedrock: invalid request")

	// ErrRequestFailed is returned by Provider.Stream when Bedrock rejected
	// the request or could not be reached before the stream began, after
	// the SDK's retries. The SDK error (a smithy.APIError such as
	// *types.ThrottlingException, with the HTTP status) is wrapped too.
	ErrRequestFailed = errors.New("bedrock: request failed")
)
