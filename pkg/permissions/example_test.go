package permissions_test

import (
	"fmt"
	"strings"

	"github.com/llmworker/llmworker/pkg/permissions"
)

// A client that submits turns may publish the request subjects, upload
// attachments to the LLMW_MEDIA object store (its chunks and the
// JetStream API of its stream) and hear rejections; nothing else of
// llmworker's.
func ExampleFor() {
	p := permissions.For(permissions.Submitter, "acme")
	for _, s := range p.Publish {
		if !strings.Contains(s, "LLMW_MEDIA") {
			fmt.Println("publish", s)
		}
	}
	fmt.Println("publish", len(p.Publish)-4, "subjects of LLMW_MEDIA")
	fmt.Println("subscribe", p.Subscribe)
	// Output:
	// publish acme.mcp.resume.*
	// publish acme.turn.cancel.*
	// publish acme.turn.resume
	// publish acme.turn.submit
	// publish 14 subjects of LLMW_MEDIA
	// subscribe [_INBOX.> acme.turn.rejected.*]
}
