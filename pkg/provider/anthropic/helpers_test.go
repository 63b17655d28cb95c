package anthropic_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/llmworker/llmworker/pkg/provider/providertest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, providertest.LeakOptions(
		// Started by an init function of a dependency of the SDK's vertex
		// package.
		goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"),
	)...)
}
