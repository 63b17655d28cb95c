package tool

import (
	"testing"

	"go.uber.org/goleak"
)

// The package spawns no goroutines; the tests do (concurrency tests), and
// goleak checks they all end.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
