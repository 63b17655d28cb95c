package main

import "github.com/llmworker/llmworker/internal/cmdutil/cmdtest"

// syncBuffer is a buffer safe for the logger's and the test's goroutines.
type syncBuffer = cmdtest.SyncBuffer
