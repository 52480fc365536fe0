package handlers

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/store"
)

// addRunFile stores body as the run's file at path.
func addRunFile(t *testing.T, st *store.Store, runID int64, path, body string) {
	t.Helper()
	ctx := context.Background()
	blob, err := st.Artifacts().Put(ctx, strings.NewReader(body))
	require.NoError(t, err)
	require.NoError(t, st.AddRunArtifact(ctx, store.RunArtifact{RunID: runID, Path: path, SHA256: blob.SHA256, Size: blob.Size}))
}

// Raw files and report bundles stream from the artifact store, whole or
// by range, with their digest as the ETag.
func TestArtifactDownloadsStreamWithRanges(t *testing.T) {
	t.Parallel()
	pb := setupProgram(t)
	run := pb.signedRun(t) // its events.jsonl is {"seq":1}\n
	get := func(path string, header map[string]string) (*http.Response, []byte) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, pb.ts.URL+path, nil)
		require.NoError(t, err)
		// As a downloader asks (no compression): the lengths and ranges
		// are then those of the stored bytes.
		req.Header.Set("Accept-Encoding", "identity")
		for k, v := range header {
			req.Header.Set(k, v)
		}
		res, err := pb.viewer.Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		body, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		return res, body
	}
	events := pb.url(fmt.Sprintf("/runs/%d/artifacts/events.jsonl", run))
	whole := []byte(`{"seq":1}` + "\n")
	sum := sha256.Sum256(whole)
	digest := hex.EncodeToString(sum[:])

	res, body := get(events, nil)
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Equal(t, whole, body)
	require.Equal(t, "10", res.Header.Get("Content-Length"))
	require.Equal(t, digest, res.Header.Get("X-Content-SHA256"))
	require.Equal(t, "bytes", res.Header.Get("Accept-Ranges"))
	require.Equal(t, "text/plain; charset=utf-8", res.Header.Get("Content-Type"))
	etag := res.Header.Get("ETag")
	require.Equal(t, `"sha256:`+digest+`"`, etag)

	res, body = get(events, map[string]string{"Range": "bytes=2-4"})
	require.Equal(t, http.StatusPartialContent, res.StatusCode)
	require.Equal(t, whole[2:5], body)
	require.Equal(t, "bytes 2-4/10", res.Header.Get("Content-Range"))

	res, body = get(events, map[string]string{"Range": "bytes=-3"})
	require.Equal(t, http.StatusPartialContent, res.StatusCode)
	require.Equal(t, whole[7:], body, "the last bytes")

	res, _ = get(events, map[string]string{"Range": "bytes=50-60"})
	require.Equal(t, http.StatusRequestedRangeNotSatisfiable, res.StatusCode)

	res, body = get(events, map[string]string{"If-None-Match": etag})
	require.Equal(t, http.StatusNotModified, res.StatusCode)
	require.Empty(t, body)

	// A range of the signed bundle is that range of the whole bundle.
	report := pb.url(fmt.Sprintf("/runs/%d/report.tar.gz", run))
	bundle := pb.download(t, pb.viewer, report)
	res, body = get(report, map[string]string{"Range": "bytes=0-1"})
	require.Equal(t, http.StatusPartialContent, res.StatusCode)
	require.Equal(t, bundle[:2], body)
	require.Equal(t, []byte{0x1f, 0x8b}, body, "gzip")
	require.Equal(t, "application/gzip", res.Header.Get("Content-Type"))
}

// A client that accepts gzip gets a text file compressed when it asks for
// all of it, but a range as the stored bytes: Content-Range and
// Content-Length count those, so a compressed part would be wrong.
func TestArtifactRangesAreNeverCompressed(t *testing.T) {
	t.Parallel()
	pb := setupProgram(t)
	run := pb.signedRun(t) // its events.jsonl is {"seq":1}\n
	whole := []byte(`{"seq":1}` + "\n")
	get := func(header map[string]string) (*http.Response, []byte) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, pb.ts.URL+pb.url(fmt.Sprintf("/runs/%d/artifacts/events.jsonl", run)), nil)
		require.NoError(t, err)
		// Set by hand, so that the client hands over the bytes as sent.
		req.Header.Set("Accept-Encoding", "gzip")
		for k, v := range header {
			req.Header.Set(k, v)
		}
		res, err := pb.viewer.Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		body, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		return res, body
	}

	res, body := get(nil)
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Equal(t, "gzip", res.Header.Get("Content-Encoding"), "the whole text file is compressed")
	zr, err := gzip.NewReader(bytes.NewReader(body))
	require.NoError(t, err)
	plain, err := io.ReadAll(zr)
	require.NoError(t, err)
	require.Equal(t, whole, plain)

	res, body = get(map[string]string{"Range": "bytes=2-4"})
	require.Equal(t, http.StatusPartialContent, res.StatusCode)
	require.Empty(t, res.Header.Get("Content-Encoding"))
	require.Equal(t, "bytes 2-4/10", res.Header.Get("Content-Range"))
	require.Equal(t, "3", res.Header.Get("Content-Length"))
	require.Equal(t, whole[2:5], body)

	// Several ranges: a multipart answer, each part the stored bytes.
	res, body = get(map[string]string{"Range": "bytes=0-1,7-9"})
	require.Equal(t, http.StatusPartialContent, res.StatusCode)
	require.Empty(t, res.Header.Get("Content-Encoding"))
	_, params, err := mime.ParseMediaType(res.Header.Get("Content-Type"))
	require.NoError(t, err)
	mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
	var parts [][]byte
	for {
		p, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		b, err := io.ReadAll(p)
		require.NoError(t, err)
		parts = append(parts, b)
	}
	require.Equal(t, [][]byte{whole[0:2], whole[7:10]}, parts)
}
