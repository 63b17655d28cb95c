package events

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// The fast decoder is a shortcut, never a second opinion: whatever it
// accepts, encoding/json decodes to the same delta.
func FuzzDecodeDeltaFast(f *testing.F) {
	for _, s := range []string{
		`{"index":0,"text":"Hello"}`,
		`{"index":3,"thinking":"a \"quoted\" word\n"}`,
		`{"index":12,"input_json":"{\"city\":\"Oslo\"}"}`,
		`{"index":0,"text":"\u00e9\ud83d\ude00 \/ \b\f\r\t"}`,
		`{"index":0,"text":"\ud83d"}`,
		`{"index":0,"text":"\udc00\u0041"}`,
		`{"index":01,"text":"x"}`,
		`{"index":0,"text":"x","step":1}`,
		`{"index":0,"text":"x"} `,
		`{"index":0,"text":"caf` + "\xe9" + `"}`,
		`{"index":0,"text":"tab` + "\t" + `"}`,
		`{"index":0,"text":"ok"}`,
		`{"index":9999999999,"text":"x"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		fast, ok := decodeDeltaFast(b)
		if !ok {
			return
		}
		slow, err := Decode[BlockDelta](b)
		if err != nil {
			t.Fatalf("fast path accepted %q, encoding/json refuses it: %v", b, err)
		}
		if fast != slow {
			t.Fatalf("%q: fast %+v, encoding/json %+v", b, fast, slow)
		}
	})
}

// Whatever BlockDelta.AppendJSON writes, the fast path reads back: the
// content with each invalid UTF-8 byte as U+FFFD, as encoding/json reads
// it.
func FuzzDeltaRoundTripFast(f *testing.F) {
	f.Add(0, uint8(0), "Hello, world")
	f.Add(7, uint8(1), "line\nbreak \"quoted\" \\ back\tslash \u2028 \x01")
	f.Add(1, uint8(2), `{"a":[1,2,{"b":null}]}`)
	f.Add(0, uint8(0), "bad \xff\xfe utf8 😀")
	f.Fuzz(func(t *testing.T, index int, kind uint8, content string) {
		if index < 0 {
			index = -index
		}
		index %= 1_000_000
		d := BlockDelta{Index: index, Kind: []DeltaKind{DeltaText, DeltaThinking, DeltaInputJSON}[kind%3], Content: content}
		got, ok := decodeDeltaFast(d.AppendJSON(nil))
		if !ok {
			// Only what encoding/json reads with substitutions may fall
			// back: nothing AppendJSON writes for valid UTF-8.
			if utf8.ValidString(content) {
				t.Fatalf("fast path refused %q", d.AppendJSON(nil))
			}
			return
		}
		want := d
		want.Content = strings.ToValidUTF8(content, "\ufffd")
		if !utf8.ValidString(content) {
			// encoding/json replaces each invalid byte, ToValidUTF8 each
			// run: compare with encoding/json itself.
			slow, err := Decode[BlockDelta](d.AppendJSON(nil))
			if err != nil {
				t.Fatal(err)
			}
			want = slow
		}
		if got != want {
			t.Fatalf("round trip of %+v: got %+v", want, got)
		}
	})
}

func BenchmarkDecodeStreamDelta(b *testing.B) {
	for _, tc := range []struct{ name, data string }{
		{"plain", `{"index":0,"text":" London"}`},
		{"escaped", `{"index":1,"input_json":"{\"city\":\"Oslo\"}"}`},
	} {
		b.Run(tc.name, func(b *testing.B) {
			data := []byte(tc.data)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := DecodeStreamEvent(TypeLLMBlockDelta, data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
