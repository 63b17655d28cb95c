package providertest

import (
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"
)

// RetryAfterCase is a 429 answer whose headers ask the client to wait,
// and the wait they ask for, read as RFC 9110 §10.2.3 and OpenAI's
// retry-after-ms say.
type RetryAfterCase struct {
	Name   string
	Header http.Header
	// Want is the wait; Slack the error an HTTP date's whole seconds allow.
	Want, Slack time.Duration
}

// RetryAfterCases are the forms of Retry-After a provider sends; withMs
// adds retry-after-ms (OpenAI, Azure OpenAI), which wins over
// retry-after.
func RetryAfterCases(withMs bool) []RetryAfterCase {
	cases := []RetryAfterCase{
		{Name: "seconds", Header: http.Header{"Retry-After": {"7"}}, Want: 7 * time.Second},
		// RateLimited dates it Want from when it is made.
		{Name: "http-date", Header: http.Header{"Retry-After": {"date"}}, Want: 42 * time.Second, Slack: 2 * time.Second},
		{Name: "none", Header: http.Header{}, Want: 0},
	}
	if withMs {
		cases = append(cases, RetryAfterCase{Name: "milliseconds", Header: http.Header{"Retry-After-Ms": {strconv.Itoa(1500)}, "Retry-After": {"2"}}, Want: 1500 * time.Millisecond})
	}
	return cases
}

// RateLimited is a 429 answer with c's headers and body.
func (c RetryAfterCase) RateLimited(body string) Response {
	h := c.Header.Clone()
	if h.Get("Retry-After") == "date" {
		h.Set("Retry-After", time.Now().Add(c.Want).UTC().Format(http.TimeFormat))
	}
	return Response{Status: http.StatusTooManyRequests, Header: h, Body: []byte(body)}
}

// CheckRetryAfter fails t unless err says (RetryAfter() time.Duration,
// which pkg/quota reads) the wait c asks for.
func (c RetryAfterCase) CheckRetryAfter(t testing.TB, err error) {
	t.Helper()
	var ra interface{ RetryAfter() time.Duration }
	if !errors.As(err, &ra) {
		t.Fatalf("%s: error %v (%T) has no RetryAfter", c.Name, err, err)
	}
	if got := ra.RetryAfter(); got < c.Want-c.Slack || got > c.Want+c.Slack {
		t.Errorf("%s: RetryAfter %v, want %v (±%v)", c.Name, got, c.Want, c.Slack)
	}
}
