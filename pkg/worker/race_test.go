//go:build race

package worker_test

// raceEnabled: the race detector's runtime allocates besides the code.
const raceEnabled = true
