package worker

import (
	"crypto/rand"
	"encoding/binary"
	"time"
)

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
