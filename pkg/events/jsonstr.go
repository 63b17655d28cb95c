package events

import "unicode/utf8"

const hexDigits = "0123456789abcdef"

// AppendJSONString appends s as a JSON string literal. Invalid UTF-8 becomes
// U+FFFD, as encoding/json does; U+2028 and U+2029 are escaped so the output
// is safe to embed in JavaScript.
func AppendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	b = AppendJSONEscaped(b, s)
	return append(b, '"')
}

// AppendJSONEscaped appends s escaped as AppendJSONString does, without the
// quotes: pieces appended one after another inside one literal read as the
// concatenation of the pieces each in a literal of its own (a multi-byte
// character split between two pieces is invalid in both, so U+FFFD twice),
// which is how the deltas already written are extended in place.
func AppendJSONEscaped(b []byte, s string) []byte {
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	return append(b, s[start:]...)
}
