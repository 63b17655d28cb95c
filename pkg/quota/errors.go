package quota

import "errors"

var (
	// ErrQueueFull is returned by Acquire when the call would wait and the
	// queue of its limit on this replica already holds Limits.MaxQueue
	// calls. Ingest answers it as rate_limited.
	ErrQueueFull = errors.New("quota: queue full")
	// ErrQueueTimeout is returned by Acquire when the call waited
	// Limits.MaxWait without its limit letting it through. Ingest answers
	// it as rate_limited.
	ErrQueueTimeout = errors.New("quota: waited too long for the limit")
	// ErrInvalidLimits is returned by Parse, SetLimits and New for limits
	// that cannot be applied; the message names the field.
	ErrInvalidLimits = errors.New("quota: invalid limits")
	// ErrNotProvisioned is returned by New when the LLMW_QUOTA bucket does
	// not exist (`llmworker provision` makes it).
	ErrNotProvisioned = errors.New("quota: bucket not provisioned")
	// ErrClosed is returned by Acquire after Close.
	ErrClosed = errors.New("quota: limiter closed")
)
