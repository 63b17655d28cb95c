package emit

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
