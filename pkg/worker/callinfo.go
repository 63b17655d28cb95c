package worker

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"time"
)

// CallInfo identifies one tool call of a turn. The worker puts it into the
// context of every tool execution, so that a remote executor can
// de-duplicate by CallID (a turn continued by RunFrom may run a call again
// whose result it did not see).
type CallInfo struct {
	TurnID    string
	SessionID string
	CallID    string
	// Name is the tool's name.
	Name string
	// Step is the model call that asked for the tool, from 1.
	Step int
}

type callInfoKey struct{}

// WithCallInfo returns ctx carrying ci (for tests of tools and executors).
func WithCallInfo(ctx context.Context, ci CallInfo) context.Context {
	return context.WithValue(ctx, callInfoKey{}, ci)
}

// CallInfoFrom returns the CallInfo of the tool call ctx belongs to.
func CallInfoFrom(ctx context.Context) (CallInfo, bool) {
	ci, ok := ctx.Value(callInfoKey{}).(CallInfo)
	return ci, ok
}

// crockford is the ULID alphabet: ids sort by creation time and are valid
// NATS subject tokens.
const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// NewTurnID returns a new ULID-like turn id (26 characters, time-ordered).
func NewTurnID() string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(time.Now().UnixMilli())<<16)
	_, _ = rand.Read(b[6:])
	// 128 bits as 26 base-32 digits, most significant first.
	hi := binary.BigEndian.Uint64(b[:8])
	lo := binary.BigEndian.Uint64(b[8:])
	var out [26]byte
	for i := 25; i >= 0; i-- {
		out[i] = crockford[lo&31]
		lo = lo>>5 | hi<<59
		hi >>= 5
	}
	return string(out[:])
}
