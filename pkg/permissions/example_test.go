package permissions_test

import (
	"fmt"
	"strings"

	"github.com/llmworker/llmworker/pkg/permissions"
)

// A client that submits turns may publish the request subjects, ask the
// turn service to compact a session, upload attachments to the
// LLMW_MEDIA object store (its chunks and the JetStream API of its
// stream) and hear rejections; nothing else of llmworker's.
func ExampleFor() {
	p := permissions.For(permissions.Submitter, "acme")
	media := 0
	for _, s := range p.Publish {
		if strings.Contains(s, "LLMW_MEDIA") {
			media++
			continue
		}
		fmt.Println("publish", s)
	}
	fmt.Println("publish", media, "subjects of LLMW_MEDIA")
	fmt.Println("subscribe", p.Subscribe)
	// Output:
	// publish acme.mcp.resume.*
	// publish acme.session.compact.*
	// publish acme.turn.cancel.*
	// publish acme.turn.resume
	// publish acme.turn.submit
	// publish 14 subjects of LLMW_MEDIA
	// subscribe [_INBOX.> acme.turn.rejected.*]
}
