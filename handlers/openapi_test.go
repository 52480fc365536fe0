package handlers

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/stretchr/testify/require"
)

// The OpenAPI document lists exactly the API's routes.
func TestOpenAPIDocumentCoversEveryAPIRoute(t *testing.T) {
	t.Parallel()
	b := setup(t)
	documented := map[string]bool{}
	for _, op := range apiOperations {
		documented[op.Method+" "+op.Path] = true
	}
	routed := map[string]bool{}
	err := chi.Walk(b.server.routes().(chi.Routes), func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		if !strings.HasPrefix(route, "/api/v1/") || route == "/api/v1/openapi.json" || method == http.MethodHead {
			return nil
		}
		key := method + " " + strings.TrimSuffix(route, "/")
		routed[key] = true
		require.True(t, documented[key], "%s is not in the OpenAPI document", key)
		return nil
	})
	require.NoError(t, err)
	for key := range documented {
		require.True(t, routed[key], "the OpenAPI document lists %s, which does not exist", key)
	}

	res, body := b.get(t, b.client(t), "/api/v1/openapi.json")
	require.Equal(t, http.StatusOK, res.StatusCode)
	var doc map[string]any
	require.NoError(t, json.Unmarshal([]byte(body), &doc))
	require.Equal(t, "3.1.0", doc["openapi"])
	// Every $ref points at a defined schema.
	schemas := doc["components"].(map[string]any)["schemas"].(map[string]any)
	for _, ref := range strings.Split(body, `"$ref": "#/components/schemas/`)[1:] {
		name := ref[:strings.IndexByte(ref, '"')]
		require.Contains(t, schemas, name)
	}
}

// requireDocumented fails unless the OpenAPI document lists status among
// the answers of the operation (its route as the document writes it):
// tests that see an API route answer call it, so that what a client reads
// in the document is what the route does.
func requireDocumented(t *testing.T, method, route string, status int) {
	t.Helper()
	paths := openAPIDocument(nil)["paths"].(map[string]any)
	item, ok := paths[route].(map[string]any)
	require.True(t, ok, "%s is not in the OpenAPI document", route)
	op, ok := item[strings.ToLower(method)].(map[string]any)
	require.True(t, ok, "%s %s is not in the OpenAPI document", method, route)
	require.Contains(t, op["responses"], strconv.Itoa(status), "%s %s answered %d, which its OpenAPI document does not list", method, route, status)
}
