package permissions_test

import (
	"fmt"

	"github.com/llmworker/llmworker/pkg/permissions"
)

// A client that submits turns may publish the three request subjects and
// hear rejections; nothing else of llmworker's.
func ExampleFor() {
	p := permissions.For(permissions.Submitter, "acme")
	fmt.Println(p.Publish)
	fmt.Println(p.Subscribe)
	// Output:
	// [acme.mcp.resume.* acme.turn.cancel.* acme.turn.resume acme.turn.submit]
	// [_INBOX.> acme.turn.rejected.*]
}
