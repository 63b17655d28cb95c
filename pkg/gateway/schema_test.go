package gateway_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// partSchema is the uiMessageChunkSchema of the AI SDK, transcribed by
// hand from vercel/ai packages/ai/src/ui-message-stream/ui-message-chunks.ts
// (every object there is a z.strictObject: no other keys allowed). It is
// written from the upstream definition, not from this package's code, so
// that a part the gateway writes wrongly fails here.
//
// Each key maps to its kind: "string", "bool", "any" (z.unknown()),
// "record", "enum:a|b|…"; a leading "?" marks an optional key.
var partSchema = map[string]map[string]string{
	"text-start":            {"id": "string", "providerMetadata": "?record"},
	"text-delta":            {"id": "string", "delta": "string", "providerMetadata": "?record"},
	"text-end":              {"id": "string", "providerMetadata": "?record"},
	"error":                 {"errorText": "string"},
	"tool-input-start":      {"toolCallId": "string", "toolName": "string", "providerExecuted": "?bool", "providerMetadata": "?record", "dynamic": "?bool", "title": "?string", "_meta": "?record"},
	"tool-input-delta":      {"toolCallId": "string", "inputTextDelta": "string"},
	"tool-input-available":  {"toolCallId": "string", "toolName": "string", "input": "any", "providerExecuted": "?bool", "providerMetadata": "?record", "dynamic": "?bool", "title": "?string", "_meta": "?record"},
	"tool-input-error":      {"toolCallId": "string", "toolName": "string", "input": "any", "providerExecuted": "?bool", "providerMetadata": "?record", "dynamic": "?bool", "errorText": "string", "title": "?string"},
	"tool-approval-request": {"approvalId": "string", "toolCallId": "string"},
	"tool-output-available": {"toolCallId": "string", "output": "any", "providerExecuted": "?bool", "dynamic": "?bool", "preliminary": "?bool"},
	"tool-output-error":     {"toolCallId": "string", "errorText": "string", "providerExecuted": "?bool", "dynamic": "?bool"},
	"tool-output-denied":    {"toolCallId": "string"},
	"reasoning-start":       {"id": "string", "providerMetadata": "?record"},
	"reasoning-delta":       {"id": "string", "delta": "string", "providerMetadata": "?record"},
	"reasoning-end":         {"id": "string", "providerMetadata": "?record"},
	"source-url":            {"sourceId": "string", "url": "string", "title": "?string", "providerMetadata": "?record"},
	"source-document":       {"sourceId": "string", "mediaType": "string", "title": "string", "filename": "?string", "providerMetadata": "?record"},
	"file":                  {"url": "string", "mediaType": "string", "providerMetadata": "?record"},
	"data-*":                {"id": "?string", "data": "any", "transient": "?bool"},
	"start-step":            {},
	"finish-step":           {},
	"start":                 {"messageId": "?string", "messageMetadata": "?any"},
	"finish":                {"finishReason": "?enum:stop|length|content-filter|tool-calls|error|other", "messageMetadata": "?any"},
	"abort":                 {"reason": "?string"},
	"message-metadata":      {"messageMetadata": "any"},
}

// checkPart validates one part's JSON against partSchema.
func checkPart(raw json.RawMessage) error {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return fmt.Errorf("not a JSON object: %v", err)
	}
	var typ string
	if err := json.Unmarshal(obj["type"], &typ); err != nil {
		return fmt.Errorf("type is no string: %s", obj["type"])
	}
	key := typ
	if strings.HasPrefix(typ, "data-") {
		key = "data-*"
	}
	schema, ok := partSchema[key]
	if !ok {
		return fmt.Errorf("type %q is no part type of the protocol", typ)
	}
	for k, v := range obj {
		if k == "type" {
			continue
		}
		kind, ok := schema[k]
		if !ok {
			return fmt.Errorf("%s: key %q is not in the (strict) schema", typ, k)
		}
		kind = strings.TrimPrefix(kind, "?")
		var x any
		if err := json.Unmarshal(v, &x); err != nil {
			return fmt.Errorf("%s.%s: %v", typ, k, err)
		}
		switch {
		case kind == "string":
			if _, ok := x.(string); !ok {
				return fmt.Errorf("%s.%s: want a string, got %s", typ, k, v)
			}
		case kind == "bool":
			if _, ok := x.(bool); !ok {
				return fmt.Errorf("%s.%s: want a boolean, got %s", typ, k, v)
			}
		case kind == "record":
			if _, ok := x.(map[string]any); !ok {
				return fmt.Errorf("%s.%s: want an object, got %s", typ, k, v)
			}
		case strings.HasPrefix(kind, "enum:"):
			s, _ := x.(string)
			if !slices.Contains(strings.Split(strings.TrimPrefix(kind, "enum:"), "|"), s) {
				return fmt.Errorf("%s.%s: %s is not one of %s", typ, k, v, kind)
			}
		}
	}
	for k, kind := range schema {
		if _, ok := obj[k]; !ok && !strings.HasPrefix(kind, "?") {
			return fmt.Errorf("%s: required key %q missing", typ, k)
		}
	}
	return nil
}
