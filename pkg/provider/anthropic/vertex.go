package anthropic

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/anthropics/anthropic-sdk-go/option"
	"github.com/anthropics/anthropic-sdk-go/vertex"
	"golang.org/x/oauth2/google"

	"github.com/llmworker/llmworker/pkg/provider/setup"
)

// Environment variables of Claude on Vertex AI, read when the
// corresponding VertexConfig field is empty: the ones the Gemini adapter's
// Vertex backend reads, so one project, location and credential file serve
// both. GOOGLE_APPLICATION_CREDENTIALS is read by Application Default
// Credentials.
const (
	EnvVertexProject  = setup.EnvVertexProject
	EnvVertexLocation = setup.EnvVertexLocation
	EnvVertexBaseURL  = setup.EnvVertexBaseURL
)

// VertexScope is the OAuth scope of the credentials Vertex AI calls use.
const VertexScope = setup.VertexScope

// ErrMissingVertexConfig is returned by NewVertex when no project or no
// location is configured, or no Application Default Credentials are found.
var ErrMissingVertexConfig = errors.New("anthropic: missing Vertex AI configuration")

// VertexConfig configures a Provider for Claude on Vertex AI. The zero
// value reads the project, location and base URL from the environment and
// uses Application Default Credentials.
type VertexConfig struct {
	// Project defaults to $GOOGLE_CLOUD_PROJECT, then the credentials'
	// project (a service-account file names one).
	Project string
	// Location defaults to $GOOGLE_CLOUD_LOCATION (e.g. "us-east5",
	// "global").
	Location string
	// BaseURL defaults to $GOOGLE_VERTEX_BASE_URL, then the SDK's regional
	// endpoint.
	BaseURL string
	// Credentials default to Application Default Credentials
	// (GOOGLE_APPLICATION_CREDENTIALS, gcloud's, the metadata server).
	Credentials *google.Credentials
	// HTTPClient, MaxRetries and IdleTimeout are as in Config.
	HTTPClient  *http.Client
	MaxRetries  int
	IdleTimeout time.Duration
}

// NewVertex returns a Provider for Claude on Vertex AI ("vertex-anthropic:"
// models), with the same request and stream mapping as New, through the
// SDK's vertex package. Credentials are looked up here (reading a
// credential file, no network); tokens are fetched on the first call. It
// fails with ErrMissingVertexConfig (kind missing_api_key) when the
// project, the location or credentials are missing.
func NewVertex(cfg VertexConfig) (p *Provider, err error) {
	ctx := context.Background()
	creds := cfg.Credentials
	if creds == nil {
		if creds, err = google.FindDefaultCredentials(ctx, VertexScope); err != nil {
			return nil, setup.Missing(ErrMissingVertexConfig, "no Application Default Credentials", err)
		}
	}
	site, err := setup.ResolveVertex(ErrMissingVertexConfig, cfg.Project, cfg.Location, cfg.BaseURL,
		func() string { return creds.ProjectID })
	if err != nil {
		return nil, err
	}
	// The HTTP client goes before the vertex option, which wraps its
	// transport with the OAuth token; the base URL after, which replaces
	// the regional one.
	var opts []option.RequestOption
	if cfg.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(cfg.HTTPClient))
	}
	defer func() {
		// vertex.WithCredentials panics when it cannot build its client.
		if r := recover(); r != nil {
			p, err = nil, fmt.Errorf("anthropic: vertex: %v", r)
		}
	}()
	opts = append(opts, vertex.WithCredentials(ctx, site.Location, site.Project, creds))
	if site.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(site.BaseURL))
	}
	return newProvider(opts, cfg.MaxRetries, cfg.IdleTimeout), nil
}
