package tool

import (
	"encoding/json"
	"time"
)

// Option configures a tool built by New or NewFunc.
type Option func(*config)

type config struct {
	timeout    time.Duration
	version    string
	schema     json.RawMessage
	readOnly   bool
	idempotent bool
	eager      *bool
}

// WithTimeout bounds one execution: Execute runs the function under a
// context with this timeout, and executors read it through Timeouter (the
// catalog's timeout_ms, docs/protocol.md §6). d <= 0 means no timeout of its own.
func WithTimeout(d time.Duration) Option { return func(c *config) { c.timeout = d } }

// WithVersion sets the version executors publish in the tool catalog
// (docs/protocol.md §6), read through Versioner.
func WithVersion(v string) Option { return func(c *config) { c.version = v } }

// WithReadOnly says that a call of the tool changes nothing outside it
// (MCP's readOnlyHint): it may start while the model still streams
// (Eager).
func WithReadOnly() Option { return func(c *config) { c.readOnly = true } }

// WithIdempotent says that calling the tool again with the same input
// has no effect beyond the first call's (MCP's idempotentHint): it may
// start while the model still streams (Eager).
func WithIdempotent() Option { return func(c *config) { c.idempotent = true } }

// WithEager says whether a call of the tool may start while the model
// still streams its response, over what WithReadOnly and WithIdempotent
// imply: WithEager(false) keeps a read-only tool waiting for the end of
// the response, WithEager(true) starts a tool that is neither (its
// author vouches that a call made for a response that then fails or is
// asked again does no harm).
func WithEager(eager bool) Option { return func(c *config) { c.eager = &eager } }

// WithSchema replaces the input schema, for arguments types whose schema
// cannot be generated (recursive types) or that need keywords struct tags
// cannot express. The schema must be a JSON object with "type": "object";
// input is validated against it and then decoded into the arguments type.
func WithSchema(schema json.RawMessage) Option {
	return func(c *config) { c.schema = append(json.RawMessage(nil), schema...) }
}

func newConfig(opts []Option) config {
	var c config
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	return c
}
