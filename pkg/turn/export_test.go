package turn

import "github.com/nats-io/nats.go"

// HoldSender waits until ep's sender goroutine has stored what is queued,
// then keeps it from starting again until release is called: the events
// published meanwhile queue, and the sender then takes them all at once,
// as it takes what queued behind an acknowledgement.
func HoldSender(ep *EventPublisher) (release func()) {
	for {
		ep.mu.Lock()
		if !ep.sending {
			break
		}
		if ep.advanced == nil {
			ep.advanced = make(chan struct{})
		}
		advanced := ep.advanced
		ep.mu.Unlock()
		<-advanced
	}
	ep.sending = true
	ep.mu.Unlock()
	return func() { go ep.send() }
}

// StateKey is the key of a turn's state in LLMW_TURN_STATE.
func StateKey(id string) string { return kvKey(id) }

// CancelKey is the key of a turn's cancel request in LLMW_TURN_STATE.
func CancelKey(id string) string { return cancelKey(id) }

// AnswerCancel has s answer a cancel of turn id as the one replica of
// the queue group that a client's cancel reaches, without it reaching any
// replica's onCancel: the cancel that the turn's own replica heard before
// it held the run.
func AnswerCancel(s *Service, id string) {
	s.onQueuedCancel(&nats.Msg{Subject: s.subjects.TurnCancel(id)})
}
