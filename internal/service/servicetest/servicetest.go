// Package servicetest holds test helpers of the services (cmd/... and the
// packages they run): they log from goroutines while a test reads the log.
package servicetest

import (
	"bytes"
	"sync"
)

// SyncBuffer is a bytes.Buffer that a logger's goroutines may write while
// a test reads it. The zero value is empty and ready to use.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
