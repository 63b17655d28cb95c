package gemini

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	"cloud.google.com/go/auth/credentials"
	"cloud.google.com/go/auth/httptransport"
	"google.golang.org/genai"

	"github.com/llmworker/llmworker/pkg/llm"
)

// Environment variables of Vertex AI, read when the corresponding
// VertexConfig field is empty. They are the SDK's own;
// GOOGLE_APPLICATION_CREDENTIALS (a service-account or other credential
// file) is read by Application Default Credentials.
const (
	EnvProject       = "GOOGLE_CLOUD_PROJECT"
	EnvLocation      = "GOOGLE_CLOUD_LOCATION"
	EnvVertexBaseURL = "GOOGLE_VERTEX_BASE_URL"
)

// VertexScope is the OAuth scope of the credentials Vertex AI calls use.
const VertexScope = "https://www.googleapis.com/auth/cloud-platform"

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
	missing := func(what string, err error) error {
		e := fmt.Errorf("%w: %s", ErrMissingVertexConfig, what)
		if err != nil {
			e = fmt.Errorf("%w: %s: %w", ErrMissingVertexConfig, what, err)
		}
		return &llm.APIError{ErrKind: llm.KindMissingAPIKey, Err: e}
	}
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
		return nil, missing("no Application Default Credentials", err)
	}
	project := firstOf(cfg.Project, os.Getenv(EnvProject))
	if project == "" {
		project, _ = creds.ProjectID(context.Background())
	}
	location := firstOf(cfg.Location, os.Getenv(EnvLocation))
	switch {
	case project == "":
		return nil, missing("no project (set "+EnvProject+")", nil)
	case location == "":
		return nil, missing("no location (set "+EnvLocation+")", nil)
	}
	hc := &http.Client{}
	if cfg.HTTPClient != nil {
		c := *cfg.HTTPClient
		hc = &c
	}
	rt := hc.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	hc.Transport = &retryTransport{base: rt, maxRetries: retries(cfg.MaxRetries)}
	// The token is added outside the retries, so that each attempt is
	// authorized with a token that is valid then.
	if err := httptransport.AddAuthorizationMiddleware(hc, creds); err != nil {
		return nil, fmt.Errorf("gemini: vertex: %w", err)
	}
	client, err := genai.NewClient(context.Background(), &genai.ClientConfig{
		Backend:     genai.BackendVertexAI,
		Project:     project,
		Location:    location,
		Credentials: creds,
		HTTPClient:  hc,
		HTTPOptions: genai.HTTPOptions{BaseURL: firstOf(cfg.BaseURL, os.Getenv(EnvVertexBaseURL))},
	})
	if err != nil {
		return nil, fmt.Errorf("gemini: vertex: %w", err)
	}
	return &Provider{client: client, idle: llm.Limit(cfg.IdleTimeout, DefaultIdleTimeout)}, nil
}

func retries(n int) int {
	switch {
	case n == 0:
		return defaultMaxRetries
	case n < 0:
		return 0
	}
	return n
}

func firstOf(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}
