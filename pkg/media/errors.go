package media

import "errors"

var (
	// ErrNotFound is returned by Store.Get and Resolve when the bucket
	// holds no object for a ref: it was never uploaded, or it expired
	// (provision.Options.MediaMaxAge).
	ErrNotFound = errors.New("media: no such object in " + bucket)

	// ErrCorrupt is returned by Store.Get when the bytes read back do not
	// hash to the ref they were stored under, and by Resolve when their
	// length is not the part's size.
	ErrCorrupt = errors.New("media: object does not match its ref")

	// ErrMediaType is returned by Resolve when the bytes stored under a
	// part's ref are not of the part's media_type (the check
	// events.MatchMedia makes of inline data).
	ErrMediaType = errors.New("media: the stored bytes are not of the part's media_type")

	// ErrInvalidRef is returned by Store.Get and Resolve for a ref that is
	// not sha256:<64 lowercase hex digits>.
	ErrInvalidRef = errors.New("media: invalid ref")

	// ErrTooLarge is returned by Store.Put and Offload for media larger
	// than MaxSize.
	ErrTooLarge = errors.New("media: too large")
)
