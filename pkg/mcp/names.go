package mcp

import (
	"fmt"
	"hash/fnv"
	"strings"
)

// maxToolName is the longest tool name a model accepts
// (^[a-zA-Z0-9_-]{1,64}$, events.ValidToolName).
const maxToolName = 64

// ToolName is the catalog name of tool on server: mcp__<server>__<tool>,
// the form coding-agent hooks match on (^mcp__<server>__). A tool name
// that does not fit the catalog's ^[a-zA-Z0-9_-]{1,64}$ has every other
// character replaced by '_'; a name that is then longer than 64, or equal
// to one in taken, is cut to 57 characters and ends in '_' and 6 hex
// digits of a hash of the server's original tool name, so that two
// tools never share a name. taken is updated.
func ToolName(server, tool string, taken map[string]bool) string {
	var b strings.Builder
	b.WriteString("mcp__")
	b.WriteString(server)
	b.WriteString("__")
	for _, r := range tool {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	name := b.String()
	if len(name) > maxToolName || taken[name] {
		h := fnv.New32a()
		h.Write([]byte(server + "\x00" + tool))
		suffix := fmt.Sprintf("_%06x", h.Sum32()&0xffffff)
		name = name[:min(len(name), maxToolName-len(suffix))] + suffix
	}
	taken[name] = true
	return name
}
