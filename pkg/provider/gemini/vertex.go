package gemini

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"cloud.google.com/go/auth/credentials"
	"cloud.google.com/go/auth/httptransport"
	"google.golang.org/genai"

	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/provider/setup"
)

// Environment variables of Vertex AI, read when the corresponding
// VertexConfig field is empty. They are the SDK's own;
// GOOGLE_APPLICATION_CREDENTIALS (a service-account or other credential
// file) is read by Application Default Credentials.
const (
	EnvProject       = setup.EnvVertexProject
	EnvLocation      = setup.EnvVertexLocation
	EnvVertexBaseURL = setup.EnvVertexBaseURL
)

// VertexScope is the OAuth scope of the credentials Vertex AI calls use.
const VertexScope = setup.VertexScope

// ErrMissingVertexConfig is returned by NewVertex when no project or no
// location is configured, or no Application Default Credentials are found.
var ErrMissingVertexConfig = errors.New("gemini: missing Vertex AI configuration")

// VertexConfig configures a Provider on Vertex AI. The zero value reads
// the project, location and base URL from the environment and uses
// Application Default Credentials.
type VertexConfig struct {
	// Project defaults to $GOOGLE_CLOUD_PROJECT, then the credentials'
	// project (a service-account file names one).
	Project string
	// Location defaults to $GOOGLE_CLOUD_LOCATION (e.g. "us-central1",
	// "global").
	Location string
	// BaseURL defaults to $GOOGLE_VERTEX_BASE_URL, then the SDK's regional
	// endpoint.
	BaseURL string
	// Credentials default to Application Default Credentials
	// (GOOGLE_APPLICATION_CREDENTIALS, gcloud's, the metadata server).
	Credentials *credentials.DetectOptions
	// HTTPClient, MaxRetries and IdleTimeout are as in Config.
	HTTPClient  *http.Client
	MaxRetries  int
	IdleTimeout time.Duration
}

// NewVertex returns a Provider for Gemini on Vertex AI ("vertex:" models),
// with the same request and stream mapping as New. Credentials are looked
// up here (reading a credential file, no network); tokens are fetched on
// the first call. It fails with ErrMissingVertexConfig (kind
// missing_api_key) when the project, the location or credentials are
// missing.
func NewVertex(cfg VertexConfig) (*Provider, error) {
	opts := cfg.Credentials
	if opts == nil {
		opts = &credentials.DetectOptions{}
	}
	if len(opts.Scopes) == 0 {
		o := *opts
		o.Scopes = []string{VertexScope}
		opts = &o
	}
	creds, err := credentials.DetectDefault(opts)
	if err != nil {
		return nil, setup.Missing(ErrMissingVertexConfig, "no Application Default Credentials", err)
	}
	site, err := setup.ResolveVertex(ErrMissingVertexConfig, cfg.Project, cfg.Location, cfg.BaseURL, func() string {
		p, _ := creds.ProjectID(context.Background())
		return p
	})
	if err != nil {
		return nil, err
	}
	hc := retryClient(cfg.HTTPClient, cfg.MaxRetries)
	// The token is added outside the retries, so that each attempt is
	// authorized with a token that is valid then.
	if err := httptransport.AddAuthorizationMiddleware(hc, creds); err != nil {
		return nil, fmt.Errorf("gemini: vertex: %w", err)
	}
	client, err := genai.NewClient(context.Background(), &genai.ClientConfig{
		Backend:     genai.BackendVertexAI,
		Project:     site.Project,
		Location:    site.Location,
		Credentials: creds,
		HTTPClient:  hc,
		HTTPOptions: genai.HTTPOptions{BaseURL: site.BaseURL},
	})
	if err != nil {
		return nil, fmt.Errorf("gemini: vertex: %w", err)
	}
	return &Provider{client: client, idle: llm.Limit(cfg.IdleTimeout, DefaultIdleTimeout)}, nil
}

// retryClient returns a copy of hc (nil: a plain http.Client) whose
// transport retries a request that failed before its stream began, up to
// MaxRetries n times.
func retryClient(hc *http.Client, n int) *http.Client {
	c := &http.Client{}
	if hc != nil {
		*c = *hc
	}
	rt := c.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	c.Transport = &retryTransport{base: rt, maxRetries: setup.Retries(n, defaultMaxRetries)}
	return c
}
