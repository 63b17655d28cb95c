package openai

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/azure"
	"github.com/openai/openai-go/v3/option"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/provider/setup"
)

// Environment variables of Azure OpenAI, read when the corresponding
// AzureConfig field is empty; the names are those of Azure's and OpenAI's
// SDKs.
const (
	EnvAzureEndpoint   = "AZURE_OPENAI_ENDPOINT"
	EnvAzureAPIKey     = "AZURE_OPENAI_API_KEY"
	EnvAzureToken      = "AZURE_OPENAI_AD_TOKEN"
	EnvAzureAPIVersion = "OPENAI_API_VERSION"
)

// DefaultAzureAPIVersion is the api-version sent when none is configured:
// one that serves both Chat Completions and the Responses API.
const DefaultAzureAPIVersion = "2025-04-01-preview"

// ErrMissingAzureConfig is returned by NewAzure (and by
// openairesponses.NewAzure) when no endpoint, or neither an API key nor a
// bearer token, is configured.
var ErrMissingAzureConfig = errors.New("openai: missing Azure OpenAI configuration")

// AzureConfig configures a Provider on Azure OpenAI. The zero value reads
// the environment.
type AzureConfig struct {
	// Endpoint defaults to $AZURE_OPENAI_ENDPOINT
	// (https://<resource>.openai.azure.com/).
	Endpoint string
	// APIKey defaults to $AZURE_OPENAI_API_KEY; it is sent as api-key.
	APIKey string
	// Token, used when there is no API key, defaults to
	// $AZURE_OPENAI_AD_TOKEN: a Microsoft Entra ID bearer token.
	Token string
	// TokenCredential, when set, authenticates instead of APIKey and Token
	// (e.g. an azidentity credential for workload identity).
	TokenCredential azcore.TokenCredential
	// APIVersion defaults to $OPENAI_API_VERSION, then
	// DefaultAzureAPIVersion.
	APIVersion string
	// HTTPClient, MaxRetries and IdleTimeout are as in Config.
	HTTPClient  *http.Client
	MaxRetries  int
	IdleTimeout time.Duration
}

// idleTimeout returns the idle limit of the config's streams.
func (c AzureConfig) idleTimeout() time.Duration { return llm.Limit(c.IdleTimeout, DefaultIdleTimeout) }

// AzureClientOptions returns the SDK options of an Azure OpenAI client for
// cfg, through openai-go's azure package: the endpoint and api-version,
// the deployment in the path (/openai/deployments/<model>/...), and the
// api-key header or a bearer token. An http:// endpoint is allowed for
// loopback addresses only (the SDK refuses others).
func AzureClientOptions(cfg AzureConfig) ([]option.RequestOption, error) {
	endpoint := setup.Setting(cfg.Endpoint, EnvAzureEndpoint)
	if endpoint == "" {
		return nil, setup.Missing(ErrMissingAzureConfig, "no endpoint (set "+EnvAzureEndpoint+")", nil)
	}
	version := setup.First(setup.Setting(cfg.APIVersion, EnvAzureAPIVersion), DefaultAzureAPIVersion)
	var opts []option.RequestOption
	if cfg.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(cfg.HTTPClient))
	}
	opts = append(opts, option.WithMaxRetries(setup.Retries(cfg.MaxRetries, DefaultMaxRetries)), azure.WithEndpoint(endpoint, version))
	if u, err := url.Parse(endpoint); err == nil && u.Scheme == "http" {
		opts = append(opts, azure.WithUnsafeAllowHTTP())
	}
	key := setup.Setting(cfg.APIKey, EnvAzureAPIKey)
	token := setup.Setting(cfg.Token, EnvAzureToken)
	switch {
	case cfg.TokenCredential != nil:
		opts = append(opts, azure.WithTokenCredential(cfg.TokenCredential))
	case key != "":
		opts = append(opts, azure.WithAPIKey(key))
	case token != "":
		opts = append(opts, azure.WithTokenCredential(staticToken(token)))
	default:
		return nil, setup.Missing(ErrMissingAzureConfig, "no credentials (set "+EnvAzureAPIKey+" or "+EnvAzureToken+")", nil)
	}
	return opts, nil
}

// staticToken is a bearer token that is used as it is.
type staticToken string

func (t staticToken) GetToken(context.Context, policy.TokenRequestOptions) (azcore.AccessToken, error) {
	return azcore.AccessToken{Token: string(t), ExpiresOn: time.Now().Add(time.Hour)}, nil
}

// NewAzure returns the Chat Completions adapter on Azure OpenAI ("azure:"
// models, the model being the deployment name): the same request and
// stream mapping as New, with Azure's prompt filter mapped (AzureStream).
func NewAzure(cfg AzureConfig) (llm.Provider, error) {
	opts, err := AzureClientOptions(cfg)
	if err != nil {
		return nil, err
	}
	return AzureDeployments(&Provider{client: sdk.NewClient(opts...), idle: cfg.idleTimeout()}), nil
}

// AzureDeployments adapts an OpenAI adapter to Azure's model strings:
// the model after the "provider:" prefix is the deployment, sent as the
// request's model (which the azure package moves into the path), and
// provider_options["azure"] (["azure-responses"]) applied as the wrapped
// adapter's own key, which it replaces when both are given. A
// request Azure's prompt filter refuses (HTTP 400, error code
// content_filter) becomes a stream that fails with error code
// prompt_blocked, as a blocked prompt is on the other providers, rather
// than an invalid request.
func AzureDeployments(p llm.Provider) llm.Provider { return &azureDeployments{p: p} }

type azureDeployments struct{ p llm.Provider }

// azureOptionKeys are the provider_options keys of the Azure model
// prefixes and those of the adapters they wrap, which also work.
var azureOptionKeys = map[string]string{"azure": Prefix, "azure-responses": "openai-responses"}

func (a *azureDeployments) Stream(ctx context.Context, req *llm.Request) (llm.Stream, error) {
	if req == nil {
		return a.p.Stream(ctx, req)
	}
	r := *req
	var prefix string
	prefix, r.Model = events.SplitModel(req.Model)
	if own, ok := req.ProviderOptions[prefix]; ok {
		if inner, ok := azureOptionKeys[prefix]; ok {
			// Azure's own key: the inner adapter reads its own, which
			// the Azure key replaces.
			opts := maps.Clone(req.ProviderOptions)
			delete(opts, prefix)
			opts[inner] = own
			r.ModelOptions.ProviderOptions = opts
		}
	}
	s, err := a.p.Stream(ctx, &r)
	if err != nil {
		if msg, ok := promptFiltered(err); ok {
			return llm.Normalize(ctx, llm.SliceStream(
				events.StatusEvent{Status: events.StatusStarted},
				events.ErrorEvent{Code: "prompt_blocked", Message: msg},
				events.StatusEvent{Status: events.StatusFailed},
			), llm.NormalizeOptions{}), nil
		}
	}
	return s, err
}

// promptFiltered reports whether err is Azure's refusal of a prompt by its
// content filter, with the message and the categories that were filtered.
func promptFiltered(err error) (string, bool) {
	var apiErr *sdk.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest {
		return "", false
	}
	var body struct {
		Error struct {
			Code       string `json:"code"`
			Message    string `json:"message"`
			InnerError struct {
				Result map[string]struct {
					Filtered bool   `json:"filtered"`
					Severity string `json:"severity"`
				} `json:"content_filter_result"`
			} `json:"innererror"`
		} `json:"error"`
	}
	raw := apiErr.RawJSON()
	if json.Unmarshal([]byte(raw), &body) != nil || body.Error.Code == "" {
		// The SDK may hand the error object itself.
		if json.Unmarshal([]byte(raw), &body.Error) != nil {
			return "", false
		}
	}
	if body.Error.Code != "content_filter" {
		return "", false
	}
	var cats []string
	for k, v := range body.Error.InnerError.Result {
		if v.Filtered {
			cats = append(cats, k)
		}
	}
	msg := "azure: the prompt was blocked by the content filter"
	if len(cats) > 0 {
		slices.Sort(cats)
		msg += " (" + strings.Join(cats, ", ") + ")"
	}
	if body.Error.Message != "" {
		msg += ": " + body.Error.Message
	}
	return msg, true
}
