package builtin

import (
	"context"
	"fmt"
	"math"
	"strconv"

	"github.com/llmworker/llmworker/pkg/tool"
)

// Limits of the calculator: a model cannot make it spin or recurse deeply.
const (
	maxExprLen   = 1000
	maxExprDepth = 64
)

// CalculatorArgs is the input of calculator.
type CalculatorArgs struct {
	Expression string `json:"expression" description:"Arithmetic expression with numbers, + - * / % ^ (power) and parentheses, e.g. (2 + 3) * 4 ^ 2 / 7"`
}

// Calculator returns the calculator tool: exact float64 arithmetic on an
// expression, parsed by a small recursive-descent parser. Nothing is ever
// executed: there are no names, functions or calls in the grammar.
func Calculator() tool.Tool {
	return tool.Must("calculator",
		"Evaluates an arithmetic expression: numbers, + - * / % ^ (power, right-associative), unary minus and parentheses. Returns the numeric result.",
		func(_ context.Context, a CalculatorArgs) (string, error) {
			v, err := Eval(a.Expression)
			if err != nil {
				return "", err
			}
			return strconv.FormatFloat(v, 'g', -1, 64), nil
		}, tool.WithVersion("1"))
}

// Eval evaluates an arithmetic expression (the calculator's grammar):
//
//	expr   = term { ("+" | "-") term }
//	term   = unary { ("*" | "/" | "%") unary }
//	unary  = ("+" | "-") unary | power
//	power  = atom [ "^" unary ]
//	atom   = number | "(" expr ")"
//
// Errors match ErrExpression and say where the problem is.
func Eval(expr string) (float64, error) {
	if len(expr) > maxExprLen {
		return 0, fmt.Errorf("%w: longer than %d characters", ErrExpression, maxExprLen)
	}
	p := &parser{s: expr}
	p.skip()
	if p.pos == len(p.s) {
		return 0, fmt.Errorf("%w: empty expression", ErrExpression)
	}
	v, err := p.expr()
	if err != nil {
		return 0, err
	}
	if p.pos != len(p.s) {
		return 0, p.errorf("unexpected %q", p.s[p.pos])
	}
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, fmt.Errorf("%w: the result is not a finite number", ErrExpression)
	}
	return v, nil
}

type parser struct {
	s     string
	pos   int
	depth int
}

func (p *parser) errorf(format string, args ...any) error {
	return fmt.Errorf("%w: at position %d: %s", ErrExpression, p.pos+1, fmt.Sprintf(format, args...))
}

func (p *parser) skip() {
	for p.pos < len(p.s) && (p.s[p.pos] == ' ' || p.s[p.pos] == '\t' || p.s[p.pos] == '\n' || p.s[p.pos] == '\r') {
		p.pos++
	}
}

func (p *parser) peek() byte {
	p.skip()
	if p.pos < len(p.s) {
		return p.s[p.pos]
	}
	return 0
}

func (p *parser) enter() error {
	p.depth++
	if p.depth > maxExprDepth {
		return p.errorf("nested more than %d levels", maxExprDepth)
	}
	return nil
}

func (p *parser) expr() (float64, error) {
	if err := p.enter(); err != nil {
		return 0, err
	}
	defer func() { p.depth-- }()
	v, err := p.term()
	if err != nil {
		return 0, err
	}
	for {
		switch p.peek() {
		case '+':
			p.pos++
			w, err := p.term()
			if err != nil {
				return 0, err
			}
			v += w
		case '-':
			p.pos++
			w, err := p.term()
			if err != nil {
				return 0, err
			}
			v -= w
		default:
			return v, nil
		}
	}
}

func (p *parser) term() (float64, error) {
	v, err := p.unary()
	if err != nil {
		return 0, err
	}
	for {
		op := p.peek()
		if op != '*' && op != '/' && op != '%' {
			return v, nil
		}
		at := p.pos
		p.pos++
		w, err := p.unary()
		if err != nil {
			return 0, err
		}
		switch op {
		case '*':
			v *= w
		case '/':
			if w == 0 {
				p.pos = at
				return 0, p.errorf("division by zero")
			}
			v /= w
		case '%':
			if w == 0 {
				p.pos = at
				return 0, p.errorf("modulo by zero")
			}
			v = math.Mod(v, w)
		}
	}
}

func (p *parser) unary() (float64, error) {
	switch p.peek() {
	case '-', '+':
		neg := p.s[p.pos] == '-'
		p.pos++
		if err := p.enter(); err != nil {
			return 0, err
		}
		defer func() { p.depth-- }()
		v, err := p.unary()
		if neg {
			v = -v
		}
		return v, err
	}
	return p.power()
}

func (p *parser) power() (float64, error) {
	base, err := p.atom()
	if err != nil {
		return 0, err
	}
	if p.peek() != '^' {
		return base, nil
	}
	p.pos++
	if err := p.enter(); err != nil {
		return 0, err
	}
	defer func() { p.depth-- }()
	exp, err := p.unary() // right-associative: 2^3^2 = 2^9
	if err != nil {
		return 0, err
	}
	v := math.Pow(base, exp)
	if math.IsNaN(v) {
		return 0, p.errorf("%g ^ %g is not a real number", base, exp)
	}
	return v, nil
}

func (p *parser) atom() (float64, error) {
	switch c := p.peek(); {
	case c == '(':
		p.pos++
		v, err := p.expr()
		if err != nil {
			return 0, err
		}
		if p.peek() != ')' {
			if p.pos == len(p.s) {
				return 0, p.errorf("missing )")
			}
			return 0, p.errorf("expected ), got %q", p.s[p.pos])
		}
		p.pos++
		return v, nil
	case c >= '0' && c <= '9' || c == '.':
		return p.number()
	case c == 0:
		return 0, p.errorf("unexpected end of expression")
	default:
		return 0, p.errorf("unexpected %q (only numbers, + - * / %% ^ and parentheses are allowed)", c)
	}
}

func (p *parser) number() (float64, error) {
	start := p.pos
	digits := func() {
		for p.pos < len(p.s) && p.s[p.pos] >= '0' && p.s[p.pos] <= '9' {
			p.pos++
		}
	}
	digits()
	if p.pos < len(p.s) && p.s[p.pos] == '.' {
		p.pos++
		digits()
	}
	if p.pos < len(p.s) && (p.s[p.pos] == 'e' || p.s[p.pos] == 'E') {
		save := p.pos
		p.pos++
		if p.pos < len(p.s) && (p.s[p.pos] == '+' || p.s[p.pos] == '-') {
			p.pos++
		}
		if p.pos < len(p.s) && p.s[p.pos] >= '0' && p.s[p.pos] <= '9' {
			digits()
		} else {
			p.pos = save
		}
	}
	v, err := strconv.ParseFloat(p.s[start:p.pos], 64)
	if err != nil {
		p.pos = start
		return 0, p.errorf("bad number %q", p.s[start:max(p.pos, start+1)])
	}
	return v, nil
}
