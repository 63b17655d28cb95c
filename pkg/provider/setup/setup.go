// Package setup holds the configuration steps the built-in adapters
// (pkg/provider/...) share when they build a client: a Config field or
// else the environment variable the SDK reads, the retry count a
// MaxRetries setting means, the error of a missing credential, and the
// project and location of a Vertex AI backend. It imports no provider SDK.
package setup

import (
	"fmt"
	"os"

	"github.com/llmworker/llmworker/pkg/llm"
)

// Environment variables of Vertex AI, read when the corresponding config
// field is empty: the SDKs' own, shared by Gemini and Claude on Vertex AI
// so that one project, location and credential file serve both.
// GOOGLE_APPLICATION_CREDENTIALS is read by Application Default
// Credentials.
const (
	EnvVertexProject  = "GOOGLE_CLOUD_PROJECT"
	EnvVertexLocation = "GOOGLE_CLOUD_LOCATION"
	EnvVertexBaseURL  = "GOOGLE_VERTEX_BASE_URL"
)

// VertexScope is the OAuth scope of the credentials Vertex AI calls use.
const VertexScope = "https://www.googleapis.com/auth/cloud-platform"

// First returns the first value that is not empty ("" when none is).
func First(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// Setting returns field, a config field, or else the value of the first
// of the environment variables env that is set and not empty.
func Setting(field string, env ...string) string {
	if field != "" {
		return field
	}
	for _, name := range env {
		if v := os.Getenv(name); v != "" {
			return v
		}
	}
	return ""
}

// Retries returns the retry count of a MaxRetries setting n: 0 means def,
// a negative value none.
func Retries(n, def int) int {
	switch {
	case n == 0:
		return def
	case n < 0:
		return 0
	}
	return n
}

// Missing returns the error of a constructor that lacks a credential or a
// setting: an *llm.APIError of kind missing_api_key (so a caller tells it
// from a failed call) wrapping sentinel, what is missing and the cause,
// when there is one.
func Missing(sentinel error, what string, cause error) error {
	e := fmt.Errorf("%w: %s", sentinel, what)
	if cause != nil {
		e = fmt.Errorf("%w: %s: %w", sentinel, what, cause)
	}
	return &llm.APIError{ErrKind: llm.KindMissingAPIKey, Err: e}
}

// Vertex is where a Vertex AI backend sends its calls.
type Vertex struct {
	Project, Location, BaseURL string
}

// ResolveVertex completes a Vertex AI configuration from the environment:
// the project from project, $GOOGLE_CLOUD_PROJECT, then credsProject (the
// credentials' project; nil for none), the location from location or
// $GOOGLE_CLOUD_LOCATION, the base URL from baseURL or
// $GOOGLE_VERTEX_BASE_URL (empty: the SDK's regional endpoint). It fails
// with Missing(sentinel, …) when the project or the location is unknown.
func ResolveVertex(sentinel error, project, location, baseURL string, credsProject func() string) (Vertex, error) {
	v := Vertex{
		Project:  Setting(project, EnvVertexProject),
		Location: Setting(location, EnvVertexLocation),
		BaseURL:  Setting(baseURL, EnvVertexBaseURL),
	}
	if v.Project == "" && credsProject != nil {
		v.Project = credsProject()
	}
	switch {
	case v.Project == "":
		return v, Missing(sentinel, "no project (set "+EnvVertexProject+")", nil)
	case v.Location == "":
		return v, Missing(sentinel, "no location (set "+EnvVertexLocation+")", nil)
	}
	return v, nil
}
