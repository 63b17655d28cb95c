package transcript

import "errors"

var (
	// ErrConflict is returned by Append when the subject's last message
	// is not at the stream sequence the append expected: another writer
	// appended since (a replica that claimed the turn, or another turn
	// of the session). The caller re-reads where the transcript stands
	// and decides whether it may append again.
	ErrConflict = errors.New("transcript: another writer appended first")
	// ErrMissing is returned by Read when the stream lacks an item the
	// Ref counts: the stream's limits removed it (MaxAge), or it was
	// purged or deleted.
	ErrMissing = errors.New("transcript: an item is missing from the stream")
	// ErrCorrupt is returned by Read for a stored message that is not a
	// transcript item (headers that do not parse, chunks that do not
	// join, JSON that is not a message).
	ErrCorrupt = errors.New("transcript: a stored item cannot be decoded")
	// ErrInvalid is returned for arguments no transcript has: a kind
	// other than turn or session, a key that is not a subject token, a
	// Ref whose length is negative.
	ErrInvalid = errors.New("transcript: invalid argument")
)
