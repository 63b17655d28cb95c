package providertest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
)

// EventStreamContentType is the media type of AWS's binary event stream
// (Amazon Bedrock's ConverseStream answers with it).
const EventStreamContentType = "application/vnd.amazon.eventstream"

// EventStream frames decoded ConverseStream chunks (one JSON object per
// line, each with one key: the event type, such as "contentBlockDelta",
// or an exception, such as "throttlingException", whose value is the
// payload) in the binary event-stream framing, with the SDK's own encoder:
// per message a prelude (total and header lengths, prelude CRC32), the
// headers :message-type ("event" or "exception"), :event-type or
// :exception-type, :content-type application/json, the JSON payload and
// the message CRC32. A key ending in "Exception" is an exception.
func EventStream(jsonl []byte) ([]byte, error) {
	var out bytes.Buffer
	enc := eventstream.NewEncoder()
	for i, line := range ChunkLines(jsonl) {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(line, &m); err != nil || len(m) != 1 {
			return nil, fmt.Errorf("%w: line %d: want an object with one key (the event type)", ErrBadChunk, i+1)
		}
		for typ, payload := range m {
			var msg eventstream.Message
			if len(typ) > len("Exception") && typ[len(typ)-len("Exception"):] == "Exception" {
				msg.Headers.Set(":message-type", eventstream.StringValue("exception"))
				msg.Headers.Set(":exception-type", eventstream.StringValue(typ))
			} else {
				msg.Headers.Set(":message-type", eventstream.StringValue("event"))
				msg.Headers.Set(":event-type", eventstream.StringValue(typ))
			}
			msg.Headers.Set(":content-type", eventstream.StringValue("application/json"))
			msg.Payload = payload
			if err := enc.Encode(&out, msg); err != nil {
				return nil, fmt.Errorf("line %d: %w", i+1, err)
			}
		}
	}
	return out.Bytes(), nil
}

// EventStreamResponse is a 200 response of the binary event stream body.
func EventStreamResponse(body []byte) Response {
	return Response{Status: http.StatusOK, Header: http.Header{"Content-Type": {EventStreamContentType}}, Body: body}
}
