package tool

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"
)

// The fast path of Validator: a check of the input bytes against the
// subset of JSON Schema that SchemaFor generates for plain argument structs
// (type, properties, required, additionalProperties, items, enum, const,
// integer bounds, string lengths, item counts, nullable unions), with no
// tree of the input built. It only ever *accepts*: when the input is not
// plainly valid under a schema it covers (a mistake, or a keyword, number
// or string it does not decide), it answers "don't know" and the full
// validator decides and phrases the problems. So an input it accepts must
// be one the full validator accepts, and every error still comes from the
// full validator; FuzzFastCheck checks that.

// Type bits of fastNode.types.
const (
	ftNull uint8 = 1 << iota
	ftBool
	ftInteger // the "integer" type: accepted only for integer literals
	ftNumber  // the "number" type: any number literal
	ftString
	ftArray
	ftObject
	ftAll = ftNull | ftBool | ftInteger | ftNumber | ftString | ftArray | ftObject
)

// fastMaxDepth is how deep the fast path follows nested input; deeper
// input goes to the full validator.
const fastMaxDepth = 64

// fastNode is a compiled subschema. A nil *fastNode or one with !ok
// accepts nothing, so the full validator decides.
type fastNode struct {
	ok    bool
	types uint8 // allowed JSON types

	// objects
	props    []fastProp
	propMap  map[string]int // index into props, for larger objects
	extraReq []reqName      // required names that are not in props
	nreq     int            // number of required names (bits of the mask)
	closed   bool           // additionalProperties: false
	addl     *fastNode      // additionalProperties as a schema; nil = anything

	// arrays
	items              *fastNode // nil = anything
	minItems, maxItems int       // -1 = no bound

	// strings: lengths in characters (only checked on ASCII strings)
	minLen, maxLen int // -1 = no bound

	// integer bounds (bounds that are not int64 make the node !ok)
	hasMin, hasMax, hasExMin, hasExMax bool
	min, max, exMin, exMax             int64

	// enum / const: allowed string and integer values; other values are
	// left to the full validator
	hasEnum  bool
	enumStr  []string
	enumInt  []int64
	enumNull bool
	enumBool [2]bool // false, true
}

type reqName struct {
	name string
	bit  int
}

type fastProp struct {
	name   string
	node   *fastNode
	reqBit int // -1 if not required
}

// annotations are keywords with no say in validation.
var annotations = map[string]bool{
	"title": true, "description": true, "default": true, "examples": true,
	"$comment": true, "deprecated": true, "readOnly": true, "writeOnly": true,
}

const draft2020 = "https://json-schema.org/draft/2020-12/schema"

// compileFast compiles the fast path for a schema document (as
// jsonschema.UnmarshalJSON parsed it). It returns nil when the schema is
// not of draft 2020-12 (the keywords it knows mean other things in older
// drafts).
func compileFast(doc any) *fastNode {
	if m, ok := doc.(map[string]any); ok {
		if s, ok := m["$schema"]; ok && s != draft2020 && s != draft2020+"#" {
			return nil
		}
	}
	return compileNode(doc, 0, true)
}

func compileNode(s any, depth int, root bool) *fastNode {
	no := &fastNode{}
	if depth > fastMaxDepth {
		return no
	}
	switch s := s.(type) {
	case bool:
		if !s {
			return no
		}
		return &fastNode{ok: true, types: ftAll, minItems: -1, maxItems: -1, minLen: -1, maxLen: -1}
	case map[string]any:
		n := &fastNode{ok: true, types: ftAll, minItems: -1, maxItems: -1, minLen: -1, maxLen: -1}
		reqBits := map[string]int{}
		if r, ok := s["required"]; ok {
			names, ok := r.([]any)
			if !ok || len(names) > 64 {
				return no
			}
			for _, x := range names {
				name, ok := x.(string)
				if !ok {
					return no
				}
				if _, dup := reqBits[name]; !dup {
					reqBits[name] = len(reqBits)
				}
			}
			n.nreq = len(reqBits)
		}
		for k, v := range s {
			switch {
			case annotations[k]:
			case k == "$schema" && root: // checked by compileFast
			case k == "required": // above
			case k == "type":
				t, ok := typeBits(v)
				if !ok {
					return no
				}
				n.types &= t
			case k == "oneOf" || k == "anyOf":
				// Only unions of plain types, such as the nullable
				// {"oneOf": [{"type": "string"}, {"type": "null"}]}; for
				// oneOf the types must not overlap.
				t, ok := unionBits(v, k == "oneOf")
				if !ok {
					return no
				}
				n.types &= t
			case k == "properties":
				props, ok := v.(map[string]any)
				if !ok {
					return no
				}
				for name, ps := range props {
					bit := -1
					if b, ok := reqBits[name]; ok {
						bit = b
					}
					n.props = append(n.props, fastProp{name: name, node: compileNode(ps, depth+1, false), reqBit: bit})
				}
			case k == "additionalProperties":
				if b, ok := v.(bool); ok && !b {
					n.closed = true
				} else {
					n.addl = compileNode(v, depth+1, false)
				}
			case k == "items":
				n.items = compileNode(v, depth+1, false)
			case k == "minItems", k == "maxItems", k == "minLength", k == "maxLength":
				c, ok := count(v)
				if !ok {
					return no
				}
				switch k {
				case "minItems":
					n.minItems = c
				case "maxItems":
					n.maxItems = c
				case "minLength":
					n.minLen = c
				case "maxLength":
					n.maxLen = c
				}
			case k == "minimum", k == "maximum", k == "exclusiveMinimum", k == "exclusiveMaximum":
				b, ok := int64Of(v)
				if !ok {
					return no
				}
				switch k {
				case "minimum":
					n.hasMin, n.min = true, b
				case "maximum":
					n.hasMax, n.max = true, b
				case "exclusiveMinimum":
					n.hasExMin, n.exMin = true, b
				case "exclusiveMaximum":
					n.hasExMax, n.exMax = true, b
				}
			case k == "enum" || k == "const":
				vals := []any{v}
				if k == "enum" {
					var ok bool
					if vals, ok = v.([]any); !ok {
						return no
					}
				}
				if !n.addEnum(vals) {
					return no
				}
			default:
				// format, pattern, multipleOf, $ref, allOf, if/then/else, …:
				// the full validator's.
				return no
			}
		}
		slices.SortFunc(n.props, func(a, b fastProp) int {
			if a.name < b.name {
				return -1
			}
			if a.name > b.name {
				return 1
			}
			return 0
		})
		if len(n.props) > 8 {
			n.propMap = make(map[string]int, len(n.props))
			for i, p := range n.props {
				n.propMap[p.name] = i
			}
		}
		for name, bit := range reqBits {
			if !slices.ContainsFunc(n.props, func(p fastProp) bool { return p.name == name }) {
				n.extraReq = append(n.extraReq, reqName{name, bit})
			}
		}
		return n
	}
	return no
}

func typeBits(v any) (uint8, bool) {
	one := func(s any) (uint8, bool) {
		switch s {
		case "null":
			return ftNull, true
		case "boolean":
			return ftBool, true
		case "integer":
			return ftInteger, true
		case "number":
			return ftInteger | ftNumber, true
		case "string":
			return ftString, true
		case "array":
			return ftArray, true
		case "object":
			return ftObject, true
		}
		return 0, false
	}
	if list, ok := v.([]any); ok {
		var t uint8
		for _, x := range list {
			b, ok := one(x)
			if !ok {
				return 0, false
			}
			t |= b
		}
		return t, len(list) > 0
	}
	return one(v)
}

// unionBits reads oneOf/anyOf branches that are each only a type (plus
// annotations). For oneOf, overlapping types (integer and number) would
// need counting matches, so they are not covered.
func unionBits(v any, disjoint bool) (uint8, bool) {
	list, ok := v.([]any)
	if !ok || len(list) == 0 {
		return 0, false
	}
	var t uint8
	for _, b := range list {
		m, ok := b.(map[string]any)
		if !ok {
			return 0, false
		}
		var bt uint8
		seen := false
		for k, x := range m {
			switch {
			case annotations[k]:
			case k == "type":
				if bt, ok = typeBits(x); !ok {
					return 0, false
				}
				seen = true
			default:
				return 0, false
			}
		}
		if !seen || (disjoint && t&bt != 0) {
			return 0, false
		}
		t |= bt
	}
	return t, true
}

// count reads a non-negative integer keyword value.
func count(v any) (int, bool) {
	b, ok := int64Of(v)
	if !ok || b < 0 || b > math.MaxInt32 {
		return 0, false
	}
	return int(b), true
}

// int64Of reads a number of the schema document that is an integer
// written without fraction or exponent and fits int64.
func int64Of(v any) (int64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	i, err := strconv.ParseInt(string(n), 10, 64)
	return i, err == nil
}

func (n *fastNode) addEnum(vals []any) bool {
	var strs []string
	var ints []int64
	var null bool
	var bools [2]bool
	for _, v := range vals {
		switch v := v.(type) {
		case string:
			strs = append(strs, v)
		case bool:
			if v {
				bools[1] = true
			} else {
				bools[0] = true
			}
		case nil:
			null = true
		case json.Number:
			// Numbers equal as values (1, 1.0, 1e0): only integers written
			// plainly are compared here; an instance that is not a plain
			// integer is left to the full validator.
			i, ok := int64Of(v)
			if !ok {
				return false
			}
			ints = append(ints, i)
		default: // arrays and objects
			return false
		}
	}
	if n.hasEnum { // enum and const together: both must hold
		strs = slices.DeleteFunc(strs, func(s string) bool { return !slices.Contains(n.enumStr, s) })
		ints = slices.DeleteFunc(ints, func(i int64) bool { return !slices.Contains(n.enumInt, i) })
		null = null && n.enumNull
		bools = [2]bool{bools[0] && n.enumBool[0], bools[1] && n.enumBool[1]}
	}
	n.hasEnum, n.enumStr, n.enumInt, n.enumNull, n.enumBool = true, strs, ints, null, bools
	return true
}
