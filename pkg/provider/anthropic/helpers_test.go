package anthropic_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/llmworker/llmworker/pkg/provider/providertest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, providertest.LeakOptions()...)
}
