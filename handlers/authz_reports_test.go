package handlers

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/store"
)

// reportRouteCases are the reports and keys routes of the authorization matrix.
var reportRouteCases = []routeCase{
	rc("GET", "/.well-known/accord/keys.json", public),
	rc("GET", "/.well-known/accord/keys.pem", public),
	rc("GET", "/.well-known/accord/allowed_signers", public),
	rc("GET", "/.well-known/accord/keys/{keyFile}", public),
	rc("GET", "/ssh-keys", signedIn),
	rc("POST", "/ssh-keys", signedIn, http.StatusUnprocessableEntity),
	rc("POST", "/ssh-keys/{keyID}/remove", signedIn, http.StatusNotFound),
	rc("GET", "/verify", signedIn),
	rc("POST", "/verify", signedIn, http.StatusBadRequest, http.StatusUnprocessableEntity),
	rc("GET", "/admin/keys", adminOnly),
	rc("POST", "/admin/keys/rotate", adminOnly, http.StatusSeeOther),
	rc("POST", "/admin/keys/revoke", adminOnly, http.StatusSeeOther),
	rc("GET", "/programs/{programID}/runs/{runID}/report.tar.gz", inProgramNeeds(capView)),
	rc("GET", "/programs/{programID}/runs/{runID}/report", inProgramNeeds(capView)),
	rc("POST", "/programs/{programID}/runs/{runID}/report/cosign", inProgramNeeds(capEngineer), http.StatusUnprocessableEntity),
	rc("GET", "/api/v1/programs/{programID}/runs/{runID}/report.tar.gz", apiInProgramNeeds(capView)),
	rc("GET", "/programs/{programID}/runs/import", inProgramNeeds(capEngineer)),
	rc("POST", "/programs/{programID}/runs/import/result", inProgramNeeds(capEngineer), http.StatusBadRequest, http.StatusUnprocessableEntity),
	rc("POST", "/programs/{programID}/runs/import/report", inProgramNeeds(capEngineer), http.StatusBadRequest, http.StatusUnprocessableEntity),
}

// addReportObjects gives the fixture runs a (stand-in) report bundle.
func (f *matrixFixture) addReportObjects(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	signer, err := f.b.keyring.Active()
	require.NoError(t, err)
	f.ids["keyFile"] = strings.TrimPrefix(signer.PublicKey().PEMFile(), "keys/")
	for _, ids := range []map[string]string{f.ids, f.idsB} {
		runID, err := strconv.ParseInt(ids["runID"], 10, 64)
		require.NoError(t, err)
		blob, err := f.b.store.Artifacts().Put(ctx, strings.NewReader("stand-in bundle of run "+ids["runID"]))
		require.NoError(t, err)
		_, err = f.b.store.AddRunReport(ctx, store.RunReport{RunID: runID, BundleSHA256: blob.SHA256, Size: blob.Size, ManifestSHA256: "0", KeyID: "test", Cosigners: []string{}})
		require.NoError(t, err)
	}
}
