package openairesponses

import (
	sdk "github.com/openai/openai-go/v3"

	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/provider/openai"
)

// NewAzure returns the Responses API adapter on Azure OpenAI
// ("azure-responses:" models, the model being the deployment name): the
// same request and stream mapping as New, on the client of
// openai.AzureClientOptions, with the deployment and Azure's prompt filter
// handled as openai.AzureDeployments does.
func NewAzure(cfg openai.AzureConfig) (llm.Provider, error) {
	opts, err := openai.AzureClientOptions(cfg)
	if err != nil {
		return nil, err
	}
	return openai.AzureDeployments(&Provider{client: sdk.NewClient(opts...), idle: llm.Limit(cfg.IdleTimeout, openai.DefaultIdleTimeout)}), nil
}
