package events

import (
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// decodeDeltaFast reads a llmw.llm.block.delta in the exact form
// BlockDelta.AppendJSON writes — {"index":N,"text"|"thinking"|"input_json":"…"},
// no whitespace, no other field — without reflection. It is the hot path
// of every streamed token between ingest and the turn service, where
// encoding/json (a validating scan, then UnmarshalJSON's own decode into
// pointers) would cost a fifth of the turn service's CPU. Anything else, and any
// string it does not decode exactly as encoding/json would (a lone
// surrogate, a control character), returns ok == false, and the caller
// decodes with encoding/json; FuzzDecodeDeltaFast checks that both
// agree.
func decodeDeltaFast(b []byte) (d BlockDelta, ok bool) {
	const head = `{"index":`
	if len(b) < len(head) || string(b[:len(head)]) != head {
		return d, false
	}
	i := len(head)
	start := i
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	if i == start || i-start > 9 || (b[start] == '0' && i-start > 1) {
		return d, false
	}
	n, err := strconv.Atoi(string(b[start:i]))
	if err != nil {
		return d, false
	}
	d.Index = n
	rest := b[i:]
	switch {
	case hasPrefix(rest, `,"text":"`):
		d.Kind, rest = DeltaText, rest[len(`,"text":"`):]
	case hasPrefix(rest, `,"thinking":"`):
		d.Kind, rest = DeltaThinking, rest[len(`,"thinking":"`):]
	case hasPrefix(rest, `,"input_json":"`):
		d.Kind, rest = DeltaInputJSON, rest[len(`,"input_json":"`):]
	default:
		return d, false
	}
	s, end, ok := unquoteJSON(rest)
	if !ok || end+2 != len(rest) || rest[end] != '"' || rest[end+1] != '}' {
		return d, false
	}
	d.Content = s
	return d, true
}

func hasPrefix(b []byte, p string) bool { return len(b) >= len(p) && string(b[:len(p)]) == p }

// unquoteJSON decodes the body of a JSON string (after its opening quote)
// up to its closing quote, whose position it returns. It gives up
// (ok == false) where encoding/json would substitute or refuse: control
// characters, invalid UTF-8, lone surrogates, unknown escapes.
func unquoteJSON(b []byte) (s string, end int, ok bool) {
	// Plain strings, most tokens, are one scan and one copy.
	i := 0
	for i < len(b) {
		c := b[i]
		if c == '"' {
			return string(b[:i]), i, true
		}
		if c == '\\' || c < 0x20 || c >= utf8.RuneSelf {
			break
		}
		i++
	}
	out := make([]byte, 0, len(b))
	out = append(out, b[:i]...)
	for i < len(b) {
		c := b[i]
		switch {
		case c == '"':
			return string(out), i, true
		case c < 0x20:
			return "", 0, false
		case c < utf8.RuneSelf && c != '\\':
			out = append(out, c)
			i++
		case c >= utf8.RuneSelf:
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size == 1 {
				return "", 0, false
			}
			out = append(out, b[i:i+size]...)
			i += size
		default: // an escape
			if i+1 >= len(b) {
				return "", 0, false
			}
			switch b[i+1] {
			case '"', '\\', '/':
				out = append(out, b[i+1])
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				r, ok := hex4(b[i+2:])
				if !ok {
					return "", 0, false
				}
				i += 6
				if utf16.IsSurrogate(r) {
					if len(b) < i+6 || b[i] != '\\' || b[i+1] != 'u' {
						return "", 0, false
					}
					r2, ok := hex4(b[i+2:])
					if !ok {
						return "", 0, false
					}
					if r = utf16.DecodeRune(r, r2); r == utf8.RuneError {
						return "", 0, false
					}
					i += 6
				}
				out = utf8.AppendRune(out, r)
				continue
			default:
				return "", 0, false
			}
			i += 2
		}
	}
	return "", 0, false
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}
