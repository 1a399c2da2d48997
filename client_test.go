package azsessions

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNewClientEndpoint(t *testing.T) {
	cred := &fake.TokenCredential{}
	cases := []struct {
		endpoint string
		cred     bool
		insecure bool
		want     string // "" means an error
		errText  string // part of the error's text, when want is ""
	}{
		{"https://eastus.dynamicsessions.io/subscriptions/s/resourceGroups/rg/sessionPools/p", true, false, "https://eastus.dynamicsessions.io/subscriptions/s/resourceGroups/rg/sessionPools/p", ""},
		{"https://eastus.dynamicsessions.io/subscriptions/s/resourceGroups/rg/sessionPools/p/", true, false, "https://eastus.dynamicsessions.io/subscriptions/s/resourceGroups/rg/sessionPools/p", ""},
		// issue 12 item 16: a dynamicsessions.io endpoint must name its pool
		{"https://eastus.dynamicsessions.io/pool///", true, false, "", "/subscriptions/<sub>/resourceGroups/<rg>/sessionPools/<pool>"},
		{"https://eastus.dynamicsessions.io", true, false, "", "is not a pool management endpoint"},
		{"https://eastus.dynamicsessions.io/subscriptions/s/resourceGroups/rg/sessionPools/p/python/execute", true, false, "", "drop /python/execute after the pool name"},
		{"https://eastus.dynamicsessions.io/subscriptions/s/resourceGroups/rg/sessionPools/p/executions", true, false, "", "drop /executions"},
		{"https://EastUS.DynamicSessions.io/subscriptions/s/resourcegroups/rg/sessionpools/p", true, false, "https://EastUS.DynamicSessions.io/subscriptions/s/resourcegroups/rg/sessionpools/p", ""},
		{"https://pool.env.westus2.azurecontainerapps.io/some/proxy/path", true, false, "https://pool.env.westus2.azurecontainerapps.io/some/proxy/path", ""},
		{"  https://pool.env.westus2.azurecontainerapps.io  ", true, false, "https://pool.env.westus2.azurecontainerapps.io", ""},
		{"https://pool.env.westus2.azurecontainerapps.io/", true, false, "https://pool.env.westus2.azurecontainerapps.io", ""},
		{"https://h/p?api-version=1", true, false, "", ""},
		{"https://h/p?", true, false, "", ""},
		{"https://h/p#frag", true, false, "", ""},
		{"https://h/p?x=1", false, false, "", ""},
		{"http://localhost:8080/pool", false, false, "http://localhost:8080/pool", ""},
		{"http://localhost:8080/pool", true, false, "", "Server.ClientOptions()"},
		{"http://localhost:8080/pool/", true, true, "http://localhost:8080/pool", ""},
		{"ftp://h/p", false, false, "", ""},
		{"h/p", false, false, "", ""},
		{"https://", false, false, "", ""},
		{"", false, false, "", "endpoint is empty"},
		{"   ", false, false, "", "endpoint is empty"},
		{"://bad", false, false, "", ""},
	}
	for _, c := range cases {
		t.Run(c.endpoint, func(t *testing.T) {
			opts := &ClientOptions{}
			opts.InsecureAllowCredentialWithHTTP = c.insecure
			var client *Client
			var err error
			if c.cred {
				client, err = NewClient(c.endpoint, cred, opts)
			} else {
				client, err = NewClientWithNoCredential(c.endpoint, opts)
			}
			if c.want == "" {
				require.Error(t, err)
				require.Nil(t, client)
				if c.errText != "" {
					require.ErrorContains(t, err, c.errText)
				}
				return
			}
			require.NoError(t, err)
			require.Equal(t, c.want, client.Endpoint())
			require.Equal(t, DefaultAPIVersion, client.APIVersion())
		})
	}
}

func TestNewClientOptions(t *testing.T) {
	_, err := NewClient("https://h/p", nil, nil)
	require.ErrorContains(t, err, "credential is nil")

	for _, v := range []string{"2023-01-01", "2024-09-01", "latest", "2025-10-02"} {
		opts := &ClientOptions{}
		opts.APIVersion = v
		_, err := NewClientWithNoCredential("https://h/p", opts)
		require.ErrorContains(t, err, "unknown api-version", v)
		_, err = NewClient("https://h/p", &fake.TokenCredential{}, opts)
		require.Error(t, err, v)
	}
	for _, v := range allVersions {
		opts := &ClientOptions{}
		opts.APIVersion = v
		c, err := NewClientWithNoCredential("https://h/p", opts)
		require.NoError(t, err)
		require.Equal(t, v, c.APIVersion())
	}
	c, err := NewClientWithNoCredential("https://h/p", nil)
	require.NoError(t, err)
	require.Equal(t, APIVersion20251002Preview, c.APIVersion())
	require.Equal(t, DefaultAPIVersion, c.APIVersion())
}

// TestTrailingSlashRequests: an endpoint given with trailing slashes still
// yields single-slash paths, and an http endpoint with a credential works
// when InsecureAllowCredentialWithHTTP is set (the token is sent).
func TestTrailingSlashRequests(t *testing.T) {
	var gotPath, gotAuth string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotPath, gotAuth = r.URL.EscapedPath(), r.Header.Get("Authorization")
		writeJSON(w, http.StatusOK, example(t, exBYOC2410, "get_metadata", "response_body"))
	}))
	defer srv.Close()
	opts := &ClientOptions{}
	opts.Transport = srv.Client()
	opts.InsecureAllowCredentialWithHTTP = true
	c, err := NewClient(srv.URL+"/pool//", &fake.TokenCredential{}, opts)
	require.NoError(t, err)
	_, err = c.Session(testIdentifier).GetFile(context.Background(), "README2.md", nil)
	require.NoError(t, err)
	require.Equal(t, "/pool/files/README2.md", gotPath)
	require.Equal(t, "Bearer "+fakeToken, gotAuth)
}

// TestRequestHeaders checks Accept, Content-Type and User-Agent, including a
// caller's telemetry ApplicationID.
func TestRequestHeaders(t *testing.T) {
	p := setup(t, APIVersion20251002Preview, withOptions(func(o *ClientOptions) { o.Telemetry.ApplicationID = "myapp" }))
	happyRoutes(t, p, func(r *http.Request) {
		ua := r.Header.Get("User-Agent")
		assert.True(t, strings.HasPrefix(ua, "myapp "+userAgentPrefix), ua)
		switch {
		case r.Method == http.MethodPost && r.URL.Path == "/executions":
			assert.Equal(t, "application/json", r.Header.Get("Content-Type"))
			assert.NotEmpty(t, r.Header.Get("operation-id"))
		case r.Method == http.MethodPost && r.URL.Path == "/files":
			assert.True(t, strings.HasPrefix(r.Header.Get("Content-Type"), "multipart/form-data; boundary="))
		case strings.HasSuffix(r.URL.Path, "/content"):
		case r.URL.Path == "/.management/stopSession":
		default:
			assert.Equal(t, "application/json", r.Header.Get("Accept"), r.URL.Path)
		}
		if r.Method == http.MethodGet || r.Method == http.MethodDelete {
			assert.Empty(t, r.Header.Get("Content-Type"), r.URL.Path)
			assert.Empty(t, r.Header.Get("operation-id"), r.URL.Path)
		}
	})
	for _, op := range allOps(t, APIVersion20251002Preview, "x.txt", t.TempDir()) {
		require.NoError(t, op.call(context.Background(), p.client.Session(testIdentifier)), op.name)
	}
}

// TestAPIVersionConstants pins the public constants to the wire table.
func TestAPIVersionConstants(t *testing.T) {
	require.Equal(t, []string{"2024-02-02-preview", "2024-08-02-preview", "2024-10-02-preview", "2025-02-02-preview", "2025-10-02-preview"}, allVersions)
	require.Equal(t, int64(128<<20), int64(MaxUploadBytes))
	// The deprecated name keeps its value.
	require.Equal(t, int64(MaxUploadBytes), int64(MaxUploadSize))
	require.Equal(t, "https://dynamicsessions.io/.default", DefaultScope)
}
