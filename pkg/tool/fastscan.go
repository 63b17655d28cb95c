package tool

import (
	"bytes"
	"math"
	"slices"
	"unicode/utf8"
)

// fastScanner reads one JSON document.
type fastScanner struct {
	b []byte
	i int
}

// accepts reports whether input (already normalized: not empty) is a
// single JSON value that n accepts for sure.
func (n *fastNode) accepts(input []byte) bool {
	if n == nil || !n.ok {
		return false
	}
	s := fastScanner{b: input}
	s.ws()
	if !s.value(n, 0) {
		return false
	}
	s.ws()
	return s.i == len(s.b)
}

func (s *fastScanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *fastScanner) lit(word string) bool {
	if len(s.b)-s.i < len(word) || string(s.b[s.i:s.i+len(word)]) != word {
		return false
	}
	s.i += len(word)
	return true
}

// value reads a value at s.i and reports whether it is well-formed and n
// accepts it.
func (s *fastScanner) value(n *fastNode, depth int) bool {
	if n == nil { // no constraint: well-formedness only
		n = &anything
	}
	if !n.ok || depth > fastMaxDepth || s.i >= len(s.b) {
		return false
	}
	switch c := s.b[s.i]; {
	case c == '{':
		return n.types&ftObject != 0 && !n.hasEnum && s.object(n, depth)
	case c == '[':
		return n.types&ftArray != 0 && !n.hasEnum && s.array(n, depth)
	case c == '"':
		start := s.i + 1
		plain, ok := s.str()
		if !ok || n.types&ftString == 0 {
			return false
		}
		if n.minLen < 0 && n.maxLen < 0 && !n.hasEnum {
			return true
		}
		if !plain {
			return false
		}
		str := s.b[start : s.i-1]
		if n.minLen >= 0 && len(str) < n.minLen || n.maxLen >= 0 && len(str) > n.maxLen {
			return false
		}
		if !n.hasEnum {
			return true
		}
		for _, e := range n.enumStr {
			if e == string(str) {
				return true
			}
		}
		return false
	case c == 't':
		return s.lit("true") && n.types&ftBool != 0 && (!n.hasEnum || n.enumBool[1])
	case c == 'f':
		return s.lit("false") && n.types&ftBool != 0 && (!n.hasEnum || n.enumBool[0])
	case c == 'n':
		return s.lit("null") && n.types&ftNull != 0 && (!n.hasEnum || n.enumNull)
	case c == '-' || c >= '0' && c <= '9':
		return s.number(n)
	}
	return false
}

// anything is the node of an unconstrained value.
var anything = fastNode{ok: true, types: ftAll, minItems: -1, maxItems: -1, minLen: -1, maxLen: -1}

func (s *fastScanner) object(n *fastNode, depth int) bool {
	s.i++ // {
	var seen uint64
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == '}' {
		s.i++
		return n.nreq == 0
	}
	for {
		if s.i >= len(s.b) || s.b[s.i] != '"' {
			return false
		}
		start := s.i + 1
		plain, ok := s.str()
		if !ok || !plain {
			return false
		}
		key := s.b[start : s.i-1]
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return false
		}
		s.i++
		s.ws()
		var sub *fastNode
		if p, ok := n.prop(key); ok {
			sub = p.node
			if sub == nil { // a property schema must be there: compileNode never leaves it nil
				return false
			}
			if p.reqBit >= 0 {
				seen |= 1 << p.reqBit
			}
		} else {
			if n.closed {
				return false
			}
			sub = n.addl
			for _, r := range n.extraReq { // required, but no property schema
				if r.name == string(key) {
					seen |= 1 << r.bit
				}
			}
		}
		if !s.value(sub, depth+1) {
			return false
		}
		s.ws()
		if s.i >= len(s.b) {
			return false
		}
		switch s.b[s.i] {
		case ',':
			s.i++
			s.ws()
		case '}':
			s.i++
			return n.nreq == 64 && seen == math.MaxUint64 || n.nreq < 64 && seen == 1<<n.nreq-1
		default:
			return false
		}
	}
}

func (n *fastNode) prop(key []byte) (fastProp, bool) {
	if n.propMap != nil {
		i, ok := n.propMap[string(key)]
		if !ok {
			return fastProp{}, false
		}
		return n.props[i], true
	}
	for _, p := range n.props {
		if p.name == string(key) {
			return p, true
		}
	}
	return fastProp{}, false
}

func (s *fastScanner) array(n *fastNode, depth int) bool {
	s.i++ // [
	count := 0
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == ']' {
		s.i++
		return n.minItems <= 0
	}
	for {
		if !s.value(n.items, depth+1) {
			return false
		}
		count++
		s.ws()
		if s.i >= len(s.b) {
			return false
		}
		switch s.b[s.i] {
		case ',':
			s.i++
			s.ws()
		case ']':
			s.i++
			return (n.minItems < 0 || count >= n.minItems) && (n.maxItems < 0 || count <= n.maxItems)
		default:
			return false
		}
	}
}

// str reads a string at s.i (the opening quote). plain: no escapes and
// only printable ASCII, so its bytes are its characters. Strings the full
// decoder might read differently (invalid UTF-8, escaped surrogates) are
// not ok.
func (s *fastScanner) str() (plain, ok bool) {
	s.i++
	plain = true
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return plain, true
		case c < 0x20:
			return false, false
		case c == '\\':
			plain = false
			if s.i+1 >= len(s.b) {
				return false, false
			}
			switch s.b[s.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i += 2
			case 'u':
				if s.i+6 > len(s.b) {
					return false, false
				}
				r, ok := hex4(s.b[s.i+2 : s.i+6])
				if !ok || r >= 0xD800 && r <= 0xDFFF {
					return false, false
				}
				s.i += 6
			default:
				return false, false
			}
		case c >= utf8.RuneSelf:
			plain = false
			r, size := utf8.DecodeRune(s.b[s.i:])
			if r == utf8.RuneError && size <= 1 {
				return false, false
			}
			s.i += size
		default:
			s.i++
		}
	}
	return false, false
}

// rawStr reads a string at s.i (the opening quote) whose content needs no
// decoding, no escapes, and returns that content: its bytes are the
// decoded string's (str has checked that they are valid UTF-8).
func (s *fastScanner) rawStr() ([]byte, bool) {
	start := s.i
	if _, ok := s.str(); !ok {
		return nil, false
	}
	content := s.b[start+1 : s.i-1]
	return content, bytes.IndexByte(content, '\\') < 0
}

// numberLit reads a number literal at s.i (-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?):
// digits and intEnd bound its integer part's digits, plainInt says it has
// neither fraction nor exponent.
func (s *fastScanner) numberLit() (digits, intEnd int, plainInt, ok bool) {
	if s.i < len(s.b) && s.b[s.i] == '-' {
		s.i++
	}
	digits = s.i
	switch {
	case s.i < len(s.b) && s.b[s.i] == '0':
		s.i++
	case s.i < len(s.b) && s.b[s.i] >= '1' && s.b[s.i] <= '9':
		for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
			s.i++
		}
	default:
		return 0, 0, false, false
	}
	intEnd = s.i
	plainInt = true
	if s.i < len(s.b) && s.b[s.i] == '.' {
		plainInt = false
		s.i++
		if !s.digits() {
			return 0, 0, false, false
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		plainInt = false
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if !s.digits() {
			return 0, 0, false, false
		}
	}
	return digits, intEnd, plainInt, true
}

// number reads a number literal at s.i and checks it against n.
func (s *fastScanner) number(n *fastNode) bool {
	start := s.i
	digits, intEnd, plainInt, ok := s.numberLit()
	if !ok {
		return false
	}
	if !plainInt {
		// 1.0 is an integer to JSON Schema and 1.5e1 may equal a bound or
		// an enum value: only the type "number" without bounds or enum is
		// decided here.
		return n.types&ftNumber != 0 && !n.hasEnum && !n.hasMin && !n.hasMax && !n.hasExMin && !n.hasExMax
	}
	if n.types&(ftInteger|ftNumber) == 0 {
		return false
	}
	if !n.hasEnum && !n.hasMin && !n.hasMax && !n.hasExMin && !n.hasExMax {
		return true
	}
	if intEnd-digits > 18 { // may not fit int64
		return false
	}
	var v int64
	for _, c := range s.b[digits:intEnd] {
		v = v*10 + int64(c-'0')
	}
	if start != digits {
		v = -v
	}
	return (!n.hasMin || v >= n.min) && (!n.hasMax || v <= n.max) &&
		(!n.hasExMin || v > n.exMin) && (!n.hasExMax || v < n.exMax) &&
		(!n.hasEnum || slices.Contains(n.enumInt, v))
}

func hex4(b []byte) (rune, bool) {
	var r rune
	for _, c := range b {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

func (s *fastScanner) digits() bool {
	start := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	return s.i > start
}
