package main

import "github.com/llmworker/llmworker/internal/service/servicetest"

// syncBuffer is a buffer safe for the logger's and the test's goroutines.
type syncBuffer = servicetest.SyncBuffer
