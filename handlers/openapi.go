package handlers

import "net/http"

// showOpenAPI serves the API's OpenAPI 3.1 document (openapi.go builds it
// from the same list of routes the API declares).
func (s *Server) showOpenAPI(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, openAPIDocument(s.baseURL))
}
