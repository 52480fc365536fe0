package handlers

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/accordlab/accord/web"
)

// maxCheckedForm bounds a URL-encoded form body read (and checked) before
// its handler runs: net/http's ParseForm reads no more (10 MiB), and form
// handlers set smaller limits of their own.
const maxCheckedForm = 10 << 20

// badBytes says where a request carried bytes that are not text.
type badBytes struct{ where string }

func (b badBytes) message() string {
	return "The request has bytes that are not text (a NUL byte or invalid UTF-8) in " + b.where + "."
}

// isText reports whether s is valid UTF-8 without NUL bytes: what
// PostgreSQL's text columns, HTML and logs can carry.
func isText(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsRune(s, 0)
}

// withTextOnly answers 400 to a request whose path, query or URL-encoded
// form carries a NUL byte or invalid UTF-8, before any handler sees it.
// (Multipart and JSON bodies are read by their handlers; what of them
// reaches the database and is refused there answers 400 too: see
// serverError.)
func (s *Server) withTextOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !isText(r.URL.Path) {
			s.refuseBadBytes(w, r, badBytes{"the path"})
			return
		}
		if bad, ok := checkValues(r.URL.RawQuery, "the query parameter"); !ok {
			s.refuseBadBytes(w, r, bad)
			return
		}
		if r.Body != nil && r.Body != http.NoBody && isURLEncodedForm(r) {
			body, err := io.ReadAll(io.LimitReader(r.Body, maxCheckedForm+1))
			if err != nil {
				s.renderError(w, r, http.StatusBadRequest)
				return
			}
			if len(body) > maxCheckedForm {
				// Larger than any form handler reads (ParseForm's own
				// limit): the handler refuses it with its own message.
				r.Body = struct {
					io.Reader
					io.Closer
				}{io.MultiReader(bytes.NewReader(body), r.Body), r.Body}
				next.ServeHTTP(w, r)
				return
			}
			if bad, ok := checkValues(string(body), "the form field"); !ok {
				s.refuseBadBytes(w, r, bad)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		next.ServeHTTP(w, r)
	})
}

func isURLEncodedForm(r *http.Request) bool {
	ct, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return err == nil && ct == "application/x-www-form-urlencoded"
}

// checkValues decodes a query or form string and checks every name and
// value; a malformed escape counts as bad bytes too.
func checkValues(raw, what string) (badBytes, bool) {
	for raw != "" {
		var pair string
		pair, raw, _ = strings.Cut(raw, "&")
		if pair == "" {
			continue
		}
		k, v, _ := strings.Cut(pair, "=")
		key, err := url.QueryUnescape(k)
		if err != nil || !isText(key) {
			return badBytes{what + " names"}, false
		}
		val, err := url.QueryUnescape(v)
		if err != nil || !isText(val) {
			return badBytes{fmt.Sprintf("%s %q", what, key)}, false
		}
	}
	return badBytes{}, true
}

// refuseBadBytes answers 400 with the place of the bad bytes.
func (s *Server) refuseBadBytes(w http.ResponseWriter, r *http.Request, bad badBytes) {
	if isAPI(r) {
		writeJSON(w, http.StatusBadRequest, apiError{Error: bad.message(), RequestID: requestID(r.Context())})
		return
	}
	p := s.page(r, http.StatusText(http.StatusBadRequest), "")
	s.render(w, r, http.StatusBadRequest, web.ErrorPage(p, http.StatusBadRequest, bad.message(), "Remove them and try again.", requestID(r.Context())))
}

// isNotTextError reports whether PostgreSQL refused a value because it is
// not text in the database's encoding (a NUL byte, invalid UTF-8, \u0000
// in JSON): bytes a client sent in a multipart or JSON body.
func isNotTextError(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	switch pgErr.Code {
	case "22021", // character_not_in_repertoire: invalid byte sequence, 0x00
		"22P05": // untranslatable_character: \u0000 in jsonb
		return true
	}
	return false
}
