package httpapi

import (
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/stretchr/testify/require"

	"github.com/ledgerq/ledgerq/internal/metrics"
)

// TestServer_EchoRoutesAndTheDocumentMatch walks echo's routes and the
// document's operations, both the one GET /openapi.json serves and
// api/openapi.yaml, and fails on a route one of them lacks.
func TestServer_EchoRoutesAndTheDocumentMatch(t *testing.T) {
	t.Parallel()
	s := New(DefaultConfig(), Deps{Metrics: metrics.New()})

	routes := make(map[string]bool)
	for _, r := range s.echo.Routes() {
		routes[r.Method+" "+openAPIPath(r.Path)] = true
	}
	require.NotEmpty(t, routes)

	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/openapi.json", nil))
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	served := operations(t, rec.Body.Bytes())

	source, err := os.ReadFile("../../api/openapi.yaml")
	require.NoError(t, err)
	require.Equal(t, operations(t, source), served,
		"GET /openapi.json serves other operations than api/openapi.yaml: run make generate")

	for r := range routes {
		if !served[r] {
			t.Errorf("echo serves %s, which the document lacks", r)
		}
	}
	for op := range served {
		if !routes[op] {
			t.Errorf("the document has %s, which echo does not serve", op)
		}
	}
}

// operations returns "METHOD /path" for every operation of an OpenAPI document.
func operations(t *testing.T, data []byte) map[string]bool {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(data)
	require.NoError(t, err)
	ops := make(map[string]bool)
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			ops[method+" "+path] = true
		}
	}
	require.NotEmpty(t, ops)
	return ops
}

// openAPIPath turns echo's /v1/batches/:id into /v1/batches/{id}.
func openAPIPath(echoPath string) string {
	parts := strings.Split(echoPath, "/")
	for i, p := range parts {
		if name, ok := strings.CutPrefix(p, ":"); ok {
			parts[i] = "{" + name + "}"
		}
	}
	return strings.Join(parts, "/")
}
