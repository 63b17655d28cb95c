package providertest

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
)

// TokenServer is a stand-in for Google's OAuth token endpoint: it answers
// the service-account token exchange (grant_type
// urn:ietf:params:oauth:grant-type:jwt-bearer with a signed assertion)
// with Token.
type TokenServer struct {
	URL   string
	Token string
	// Exchanges counts the token requests that carried a JWT assertion.
	Exchanges atomic.Int64
}

// ServiceAccountFile writes a Google service-account credential file for
// project, with a fresh RSA key, whose token_uri is a local TokenServer
// that hands out token; both go away when the test ends. Point
// GOOGLE_APPLICATION_CREDENTIALS at the file and Application Default
// Credentials use it, with no account anywhere.
func ServiceAccountFile(t testing.TB, project, token string) (string, *TokenServer) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	ts := &TokenServer{Token: token}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil || r.Form.Get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer" || r.Form.Get("assertion") == "" {
			http.Error(w, `{"error":"invalid_grant"}`, http.StatusBadRequest)
			return
		}
		ts.Exchanges.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": token, "token_type": "Bearer", "expires_in": 3600})
	}))
	t.Cleanup(srv.Close)
	ts.URL = srv.URL
	sa := map[string]string{
		"type":           "service_account",
		"project_id":     project,
		"private_key_id": "0123456789abcdef",
		"private_key":    string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email":   "llmworker-test@" + project + ".iam.gserviceaccount.com",
		"client_id":      "100000000000000000000",
		"token_uri":      srv.URL + "/token",
	}
	b, err := json.Marshal(sa)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "service-account.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, ts
}
