package main

import (
	"context"
	"fmt"
	"strconv"

	"github.com/cloudwego/eino/components/model"
	etool "github.com/cloudwego/eino/components/tool"
	"github.com/cloudwego/eino/components/tool/utils"
	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/flow/agent/react"
	"github.com/cloudwego/eino/schema"
)

// einoModel is the scripted model as Eino's ToolCallingChatModel: the
// same script as scriptedModel.
type einoModel struct{ par int }

var _ model.ToolCallingChatModel = einoModel{}

func (m einoModel) answer(input []*schema.Message) *schema.Message {
	results := 0
	for _, msg := range input {
		if msg.Role == schema.Tool {
			results++
		}
	}
	step := results / m.par
	if step >= steps-1 {
		return schema.AssistantMessage("done", nil)
	}
	calls := make([]schema.ToolCall, m.par)
	for i := range calls {
		n := step*m.par + i
		calls[i] = schema.ToolCall{ID: "call_" + strconv.Itoa(n), Type: "function", Function: schema.FunctionCall{Name: "echo", Arguments: `{"n":` + strconv.Itoa(n) + `}`}}
	}
	return schema.AssistantMessage("", calls)
}

func (m einoModel) Generate(_ context.Context, input []*schema.Message, _ ...model.Option) (*schema.Message, error) {
	return m.answer(input), nil
}

func (m einoModel) Stream(_ context.Context, input []*schema.Message, _ ...model.Option) (*schema.StreamReader[*schema.Message], error) {
	return schema.StreamReaderFromArray([]*schema.Message{m.answer(input)}), nil
}

func (m einoModel) WithTools([]*schema.ToolInfo) (model.ToolCallingChatModel, error) { return m, nil }

// einoInProcess measures Eino's ReAct agent (Generate) with the scripted
// model and a typed echo tool (utils.InferTool: JSON-decoded input).
func einoInProcess(par int, o runOpts) (*result, error) {
	ctx := context.Background()
	echo, err := utils.InferTool("echo", "echoes n", func(_ context.Context, a echoArgs) (string, error) {
		return strconv.Itoa(a.N), nil
	})
	if err != nil {
		return nil, err
	}
	agent, err := react.NewAgent(ctx, &react.AgentConfig{
		ToolCallingModel: einoModel{par: par},
		ToolsConfig:      compose.ToolsNodeConfig{Tools: []etool.BaseTool{echo}},
		MaxStep:          4 * steps,
	})
	if err != nil {
		return nil, err
	}
	in := []*schema.Message{schema.UserMessage("go")}
	return measure(o, func() error {
		out, err := agent.Generate(ctx, in)
		if err != nil {
			return err
		}
		if out.Content != "done" {
			return fmt.Errorf("eino answered %q", out.Content)
		}
		return nil
	})
}
