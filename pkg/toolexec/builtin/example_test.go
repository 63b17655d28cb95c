package builtin_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/llmworker/llmworker/pkg/toolexec/builtin"
)

func ExampleCalculator() {
	calc := builtin.Calculator()
	out, err := calc.Execute(context.Background(), json.RawMessage(`{"expression":"(2 + 3) * 4 ^ 2 / 8"}`))
	fmt.Println(out, err)
	_, err = calc.Execute(context.Background(), json.RawMessage(`{"expression":"import os"}`))
	fmt.Println(err)
	// Output:
	// 10 <nil>
	// tool "calculator" failed: builtin: invalid expression: at position 1: unexpected 'i' (only numbers, + - * / % ^ and parentheses are allowed)
}
