package turn

import (
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// acker is what the service does with a turn request once it is read:
// acknowledge it (or not) and look at its delivery metadata. A
// jetstream.Msg is one; a run keeps a requestAck instead.
type acker interface {
	Ack() error
	Nak() error
	NakWithDelay(delay time.Duration) error
	InProgress() error
	TermWithReason(reason string) error
	Metadata() (*jetstream.MsgMetadata, error)
}

var (
	_ acker = jetstream.Msg(nil)
	_ acker = (*requestAck)(nil)
)

// requestAck acknowledges a turn request after its message is gone: a
// jetstream.Msg keeps the request's headers and body (a submit's whole
// conversation) for as long as it is referenced, and a run references its
// request until it ends, only to acknowledge it. requestAck keeps the
// acknowledgement subject and the delivery metadata, and sends what
// jetstream.Msg sends there (JetStream's acknowledgement protocol: +ACK,
// -NAK with an optional delay, +WPI, +TERM with a reason); like
// jetstream.Msg it sends nothing after a final acknowledgement. nats.go's
// JetStream API has no way to acknowledge a delivery by its subject
// without its message, so this file keeps the protocol's four bodies;
// ack_internal_test.go checks, on a real server, that they are byte for
// byte what jetstream.Msg sends, so a nats.go that changed them fails it.
type requestAck struct {
	nc    *nats.Conn
	reply string
	md    *jetstream.MsgMetadata
	mdErr error

	mu   sync.Mutex
	ackd bool
}

func newRequestAck(nc *nats.Conn, m jetstream.Msg) *requestAck {
	md, err := m.Metadata()
	return &requestAck{nc: nc, reply: m.Reply(), md: md, mdErr: err}
}

func (a *requestAck) Ack() error { return a.send([]byte("+ACK"), true) }
func (a *requestAck) Nak() error { return a.send([]byte("-NAK"), true) }

func (a *requestAck) NakWithDelay(delay time.Duration) error {
	if delay <= 0 {
		return a.Nak()
	}
	b := strconv.AppendInt([]byte(`-NAK {"delay": `), delay.Nanoseconds(), 10)
	return a.send(append(b, '}'), true)
}

func (a *requestAck) InProgress() error { return a.send([]byte("+WPI"), false) }

func (a *requestAck) TermWithReason(reason string) error {
	b := []byte("+TERM")
	if reason != "" {
		b = append(append(b, ' '), reason...)
	}
	return a.send(b, true)
}

func (a *requestAck) Metadata() (*jetstream.MsgMetadata, error) { return a.md, a.mdErr }

func (a *requestAck) send(body []byte, final bool) error {
	if a.reply == "" {
		return jetstream.ErrMsgNoReply
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ackd {
		return jetstream.ErrMsgAlreadyAckd
	}
	if err := a.nc.Publish(a.reply, body); err != nil {
		return err
	}
	a.ackd = final
	return nil
}
