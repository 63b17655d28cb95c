package compact

import (
	"errors"
	"fmt"
)

var (
	// ErrOverflow is returned by Plan (wrapped in an *OverflowError) when
	// no compaction makes the context fit the model's room: a message
	// that may not be compacted (the newest, a pinned one, an unfinished
	// call) is larger than it alone, or a forced compaction found nothing
	// to compact.
	ErrOverflow = errors.New("compact: context does not fit the model's window")

	// ErrSummarizer is returned by Plan (wrapping the summarizer's error)
	// when the summary tier's model call failed.
	ErrSummarizer = errors.New("compact: summarizer failed")
)

// OverflowError says which message keeps the context from fitting.
type OverflowError struct {
	// Reason names the message (its transcript position and role, or its
	// place among the kept messages of a compaction) and the sizes.
	Reason string
}

func (e *OverflowError) Error() string { return e.Reason }

// Unwrap makes the error match ErrOverflow.
func (e *OverflowError) Unwrap() error { return ErrOverflow }

func overflowf(format string, args ...any) error {
	return &OverflowError{Reason: fmt.Sprintf(format, args...)}
}
