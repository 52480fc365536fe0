package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/acceptance"
	"github.com/accordlab/accord/store"
	"github.com/accordlab/accord/web/specform"
)

type programBundle struct {
	*testBundle
	programID int64
	engineer  *http.Client
	owner     *http.Client
	viewer    *http.Client
	engToken  string
}

// setupProgram is a program with an engineer, an owner and a viewer.
func setupProgram(t *testing.T, opts ...setupOpts) *programBundle {
	t.Helper()
	b := setup(t, opts...)
	ctx := context.Background()
	vendor := b.createOrg(t, "Vendor", "vendor")
	customer := b.createOrg(t, "Customer", "customer")
	pid, err := b.store.CreateProgram(ctx, "Program", "", vendor, customer, nil)
	require.NoError(t, err)
	add := func(email string, org int64, role store.Role) *http.Client {
		id := b.createUser(t, email, &org, false)
		_, err := b.store.SetMember(ctx, pid, id, role)
		require.NoError(t, err)
		return b.signIn(t, email)
	}
	pb := &programBundle{testBundle: b, programID: pid}
	pb.engineer = add("eng@vendor.example", vendor, store.RoleEngineer)
	pb.owner = add("own@customer.example", customer, store.RoleOwner)
	pb.viewer = add("view@customer.example", customer, store.RoleViewer)
	pb.engToken = b.createTokenViaUI(t, pb.engineer, "read", "run")
	return pb
}

func (pb *programBundle) url(rest string) string {
	return fmt.Sprintf("/programs/%d%s", pb.programID, rest)
}

// specFormValues is what the browser submits for a spec shown in the form.
func specFormValues(spec any) url.Values {
	sections, _ := specform.Sections(spec, nil)
	v := url.Values{"_mode": {"form"}, "_action": {"save"}}
	for _, s := range sections {
		for _, f := range s.Fields {
			if f.Input == specform.InputCheckbox {
				if f.Checked {
					v.Set(f.Path, "on")
				}
				continue
			}
			v.Set(f.Path, f.Value)
		}
	}
	return v
}

func (pb *programBundle) postPage(t *testing.T, c *http.Client, path string, form url.Values) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, pb.ts.URL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	res, err := c.Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	return res, string(body)
}

func kvTemplate(t *testing.T) acceptance.ProfileSpec {
	tmpl, ok := acceptance.LookupProfileTemplate("kv-cache-lookup")
	require.True(t, ok)
	return tmpl.Spec
}

func TestProfileCreateEditVersionAndDiff(t *testing.T) {
	t.Parallel()
	pb := setupProgram(t)
	spec := kvTemplate(t)

	res, _ := pb.postPage(t, pb.engineer, pb.url("/profiles"), specFormValues(&spec))
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	loc := res.Header.Get("Location")
	require.Regexp(t, `/profiles/\d+$`, loc)
	_, page := pb.get(t, pb.engineer, loc)
	require.Contains(t, page, `id="spec-version">v1<`)

	// Edit: a larger block size makes version 2.
	edited := spec.Clone()
	edited.Steps[0].Fio.BlockSize = 8 << 10
	form := specFormValues(&edited)
	form.Set("_base", "1")
	form.Set("_note", "8 KiB blocks")
	res, _ = pb.postPage(t, pb.engineer, loc+"/edit", form)
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	_, page = pb.get(t, pb.engineer, loc)
	require.Contains(t, page, `id="spec-version">v2<`)
	require.Contains(t, page, "8 KiB blocks")

	// The same again: no version 3.
	res, page = pb.postPage(t, pb.engineer, loc+"/edit", form)
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode)
	require.Contains(t, page, "nothing changed")

	res, page = pb.get(t, pb.engineer, loc+"/diff?from=1&to=2")
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, page, "steps[0].fio.block_size")
	require.Contains(t, page, "4KiB")
	require.Contains(t, page, "8KiB")

	// Old versions stay readable and exportable as they were.
	res, body := pb.get(t, pb.engineer, loc+"/versions/1/yaml")
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, res.Header.Get("Content-Disposition"), "-v1.yaml")
	back, err := acceptance.ImportProfileYAML([]byte(body))
	require.NoError(t, err)
	d1, _ := acceptance.ProfileDigest(spec)
	d2, _ := acceptance.ProfileDigest(back)
	require.Equal(t, d1, d2, "export → import gives the same version hash")

	// The stored row cannot be rewritten.
	_, err = pb.pool.Exec(context.Background(), `UPDATE profile_versions SET note = 'rewritten'`)
	require.ErrorContains(t, err, "append-only")
}

func TestProfileFormShowsErrorsAtTheirFieldsAndSavesNothing(t *testing.T) {
	t.Parallel()
	pb := setupProgram(t)
	spec := kvTemplate(t)
	form := specFormValues(&spec)
	form.Set("steps[0].fio.block_size", "3KiB")
	form.Set("steps[0].fio.iodepth", "lots")
	res, page := pb.postPage(t, pb.engineer, pb.url("/profiles"), form)
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode)
	require.Contains(t, page, `class="field-error" id="field-steps[0].fio.iodepth"`)
	require.Contains(t, page, "is not a whole number")
	var n int
	require.NoError(t, pb.pool.QueryRow(context.Background(), `SELECT count(*) FROM profiles`).Scan(&n))
	require.Zero(t, n)

	form.Set("steps[0].fio.iodepth", "32")
	res, page = pb.postPage(t, pb.engineer, pb.url("/profiles"), form)
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode)
	require.Contains(t, page, `class="field-error" id="field-steps[0].fio.block_size"`)
}

func TestProfileYAMLEditorRefusesBadDocuments(t *testing.T) {
	t.Parallel()
	pb := setupProgram(t)
	spec := kvTemplate(t)
	good, err := acceptance.ExportProfileYAML(spec)
	require.NoError(t, err)
	post := func(text string) (int, string) {
		res, page := pb.postPage(t, pb.engineer, pb.url("/profiles"), url.Values{"_mode": {"yaml"}, "_yaml": {text}})
		return res.StatusCode, page
	}
	code, page := post(string(good) + "surprise: 1\n")
	require.Equal(t, http.StatusUnprocessableEntity, code)
	require.Contains(t, page, "surprise")
	require.Contains(t, page, "line ")

	code, page = post(strings.Replace(string(good), "schema_version: 1", "schema_version: 99", 1))
	require.Equal(t, http.StatusUnprocessableEntity, code)
	require.Contains(t, page, "schema version 99")

	big := strings.Repeat("# padding\n", 1_000_000)
	res, page := pb.postPage(t, pb.engineer, pb.url("/profiles"), url.Values{"_mode": {"yaml"}, "_yaml": {big}})
	require.Equal(t, http.StatusRequestEntityTooLarge, res.StatusCode)
	require.Contains(t, page, "the document is larger than 256 KiB, the most a profile may be; nothing was saved", "the editor again, with the limit named")
	require.Contains(t, page, `id="spec-form"`)

	code, _ = post(string(good))
	require.Equal(t, http.StatusSeeOther, code)
	var n int
	require.NoError(t, pb.pool.QueryRow(context.Background(), `SELECT count(*) FROM profiles`).Scan(&n))
	require.Equal(t, 1, n, "only the good document was saved")
}

func TestCommandStepsOnlyFromOwners(t *testing.T) {
	t.Parallel()
	pb := setupProgram(t)
	spec := acceptance.ProfileSpec{Name: "own tool", Purpose: acceptance.PurposeCustom, Storage: acceptance.Storage{Transport: acceptance.TransportLocalNVMe},
		Steps: []acceptance.StepSpec{{Name: "tool", Kind: acceptance.StepCommand, Command: &acceptance.CommandStep{Program: "/usr/bin/fio", Args: []string{"--version"}, Format: "text"}}}}
	res, page := pb.postPage(t, pb.engineer, pb.url("/profiles"), specFormValues(&spec))
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode)
	require.Contains(t, page, "only program owners may add command steps")
	res, _ = pb.postPage(t, pb.owner, pb.url("/profiles"), specFormValues(&spec))
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
}

func TestFormListActions(t *testing.T) {
	t.Parallel()
	pb := setupProgram(t)
	spec := kvTemplate(t)
	form := specFormValues(&spec)
	form.Set("_action", "add:steps")
	form.Set("_add_kind", "pause")
	res, page := pb.postPage(t, pb.engineer, pb.url("/profiles"), form)
	require.Equal(t, http.StatusOK, res.StatusCode, "adding a step re-shows the form")
	require.Contains(t, page, fmt.Sprintf(`id="steps[%d].pause.duration"`, len(spec.Steps)))
	var n int
	require.NoError(t, pb.pool.QueryRow(context.Background(), `SELECT count(*) FROM profiles`).Scan(&n))
	require.Zero(t, n, "nothing saved by an edit action")
}

func (pb *programBundle) api(t *testing.T, method, path, contentType string, body []byte) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, pb.ts.URL+path, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+pb.engToken)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(res.Body).Decode(&out)
	return res.StatusCode, out
}

func TestSpecsThroughTheAPI(t *testing.T) {
	t.Parallel()
	pb := setupProgram(t)
	tmpl, ok := acceptance.LookupGateSetTemplate("mlperf-llama2-70b-server")
	require.True(t, ok)
	jsonBody, err := acceptance.ExportGateSetJSON(tmpl.Spec)
	require.NoError(t, err)
	code, created := pb.api(t, "POST", pb.url("/gatesets")[0:0]+"/api/v1"+pb.url("/gatesets"), "application/json", jsonBody)
	require.Equal(t, http.StatusCreated, code, "%v", created)
	specID := int64(created["spec_id"].(float64))
	want, _ := acceptance.GateSetDigest(tmpl.Spec)
	require.Equal(t, want, created["digest"])

	// Posting the same as YAML: 409, nothing changed.
	yml, err := acceptance.ExportGateSetYAML(tmpl.Spec)
	require.NoError(t, err)
	code, _ = pb.api(t, "POST", fmt.Sprintf("/api/v1%s/%d/versions", pb.url("/gatesets"), specID), "application/yaml", yml)
	require.Equal(t, http.StatusConflict, code)
	requireDocumented(t, http.MethodPost, "/api/v1/programs/{programID}/gatesets/{specID}/versions", code)

	// An invalid one: 422 with the field named.
	bad := strings.Replace(string(yml), "metric: ttft", "metric: nonsense", 1)
	code, out := pb.api(t, "POST", fmt.Sprintf("/api/v1%s/%d/versions", pb.url("/gatesets"), specID), "application/yaml", []byte(bad))
	require.Equal(t, http.StatusUnprocessableEntity, code)
	require.Contains(t, fmt.Sprint(out["fields"]), "criteria[0].metric")

	// YAML out, as the page exports it: the same document that was posted.
	req, err := http.NewRequest(http.MethodGet, pb.ts.URL+fmt.Sprintf("/api/v1%s/%d/versions/1/yaml", pb.url("/gatesets"), specID), nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+pb.engToken)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	exported, _ := io.ReadAll(res.Body)
	res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Equal(t, "application/yaml; charset=utf-8", res.Header.Get("Content-Type"))
	require.Equal(t, string(yml), string(exported))

	code, got := pb.api(t, "GET", fmt.Sprintf("/api/v1%s/%d/versions/1", pb.url("/gatesets"), specID), "", nil)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, want, got["digest"])
	code, list := pb.api(t, "GET", "/api/v1"+pb.url("/gatesets"), "", nil)
	require.Equal(t, http.StatusOK, code)
	require.Len(t, list["gatesets"], 1)

	// By the version's id alone (what a run names): the same version. The
	// profile route reads profile versions only (this program has none);
	// an id the program lacks is 404 (another program's: the authz tests).
	versionID := int64(created["version_id"].(float64))
	code, byID := pb.api(t, "GET", fmt.Sprintf("/api/v1%s/%d", pb.url("/gateset-versions"), versionID), "", nil)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, got, byID)
	code, _ = pb.api(t, "GET", fmt.Sprintf("/api/v1%s/%d", pb.url("/profile-versions"), versionID), "", nil)
	require.Equal(t, http.StatusNotFound, code)
	code, _ = pb.api(t, "GET", fmt.Sprintf("/api/v1%s/%d", pb.url("/gateset-versions"), versionID+1000), "", nil)
	require.Equal(t, http.StatusNotFound, code)
}
