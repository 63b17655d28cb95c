package bedrock_test

import (
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	"github.com/llmworker/llmworker/pkg/provider/bedrock"
	"github.com/llmworker/llmworker/pkg/provider/providertest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, providertest.LeakOptions()...)
}

const (
	testModel  = "us.anthropic.claude-sonnet-4-20250514-v1:0"
	testKeyID  = "AKIDEXAMPLE"
	testRegion = "eu-central-1"
)

// awsEnv points the SDK's standard configuration at srv with static keys,
// and away from any shared profile or instance metadata of the machine.
func awsEnv(t testing.TB, endpoint string) {
	t.Helper()
	dir := t.TempDir()
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID":                testKeyID,
		"AWS_SECRET_ACCESS_KEY":            "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
		"AWS_SESSION_TOKEN":                "",
		"AWS_REGION":                       testRegion,
		"AWS_DEFAULT_REGION":               "",
		"AWS_PROFILE":                      "",
		"AWS_CONFIG_FILE":                  filepath.Join(dir, "config"),
		"AWS_SHARED_CREDENTIALS_FILE":      filepath.Join(dir, "credentials"),
		"AWS_EC2_METADATA_DISABLED":        "true",
		"AWS_ENDPOINT_URL":                 "",
		"AWS_ENDPOINT_URL_BEDROCK_RUNTIME": endpoint,
		"AWS_WEB_IDENTITY_TOKEN_FILE":      "",
		"AWS_ROLE_ARN":                     "",
	} {
		t.Setenv(k, v)
	}
}

// newProvider is a Provider configured only through the environment, as
// ingest runs it, against srv; retries off so that errors are immediate.
func newProvider(t *testing.T, srv *providertest.Server, mods ...func(*bedrock.Config)) *bedrock.Provider {
	t.Helper()
	awsEnv(t, srv.URL())
	return providertest.MustNew(t, bedrock.New, bedrock.Config{MaxRetries: -1}, mods...)
}

func readFixture(path string) ([]byte, error) {
	if !filepath.IsAbs(path) {
		root, err := providertest.FixturesDir()
		if err != nil {
			return nil, err
		}
		path = filepath.Join(root, path)
	}
	return os.ReadFile(path)
}

func mustRead(t *testing.T, name string) []byte {
	t.Helper()
	b, err := readFixture(filepath.Join("bedrock", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
