package transcript

import (
	"testing"

	"github.com/nats-io/nats.go"
)

// The item decoder never panics, and what it accepts re-encodes to a
// message that decodes the same.
func FuzzDecodeItem(f *testing.F) {
	f.Add("0", "", "", []byte(`{"role":"user","content":"hi"}`), []byte(nil))
	f.Add("3", "7", "1/2", []byte(`{"role":"assistant","content":[{"type":"te`), []byte(`xt","text":"a"}]}`))
	f.Add("x", "0", "2/1", []byte(`{`), []byte(`}`))
	f.Fuzz(func(t *testing.T, pos, prev, part string, a, b []byte) {
		h := nats.Header{}
		h.Set(HeaderPos, pos)
		if prev != "" {
			h.Set(HeaderPrev, prev)
		}
		if part != "" {
			h.Set(HeaderPart, part)
		}
		n1, err := decodeNode(h, a)
		if err != nil {
			return
		}
		chunks := []node{n1}
		if n1.of == 2 {
			n2 := n1
			n2.part, n2.data = 2, b
			n1.part = 1
			chunks = []node{n1, n2}
		}
		m, err := decodeItem(chunks)
		if err != nil {
			return
		}
		enc, err := m.AppendJSON(nil)
		if err != nil {
			t.Fatalf("a decoded item does not encode: %v", err)
		}
		again, err := decodeItem([]node{{pos: n1.pos, part: 1, of: 1, data: enc}})
		if err != nil {
			t.Fatalf("%s does not decode again: %v", enc, err)
		}
		if enc2, _ := again.AppendJSON(nil); string(enc2) != string(enc) {
			t.Fatalf("round trip changed the item: %s then %s", enc, enc2)
		}
	})
}
