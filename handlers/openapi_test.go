package handlers

import (
	"encoding/json"
	"net/http"
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
