// Package apiclient calls Accord's JSON API (/api/v1) with a bearer token:
// typed requests and answers for the routes pipelines use. `accord submit`
// is built on it, and the handlers' tests call the API through it, so that
// the client and the server are checked against each other.
package apiclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Config says where the API is and who calls it.
type Config struct {
	// BaseURL is the server's base URL (https://accord.example.com); the
	// API is below BaseURL/api/v1. It must not carry credentials.
	BaseURL *url.URL
	// Token is the bearer token (an API token with the scopes the calls need).
	Token string
	// UserAgent names the caller, such as "accord-submit/v1.2".
	UserAgent string
	// HTTPClient defaults to a client of its own.
	HTTPClient *http.Client
	// RequestTimeout bounds one API call (30 s by default). Downloads are
	// bounded by the caller's context only.
	RequestTimeout time.Duration
}

// Client calls the API. Its errors never contain the token.
type Client struct {
	base           *url.URL
	token          string
	userAgent      string
	http           *http.Client
	requestTimeout time.Duration
}

// New returns a client; the base URL's trailing slashes are dropped.
// (It runs in `accord submit` on its user's machine, toward the Accord
// server that user names: no call of the server's own, so outside the
// server's egress policy.)
func New(cfg Config) *Client {
	base := *cfg.BaseURL
	base.Path = strings.TrimRight(base.Path, "/")
	c := &Client{base: &base, token: cfg.Token, userAgent: cfg.UserAgent, http: cfg.HTTPClient, requestTimeout: cfg.RequestTimeout}
	if c.http == nil {
		c.http = &http.Client{}
	}
	if c.requestTimeout <= 0 {
		c.requestTimeout = 30 * time.Second
	}
	return c
}

// maxAnswer bounds a JSON answer (a large evaluation is a few MiB).
const maxAnswer = 32 << 20

// StatusError is a non-2xx answer of the API.
type StatusError struct {
	Method, Path string
	Status       int
	Message      string            // the API's error text, or a description of the body
	Fields       map[string]string // field errors of a 422
	RequestID    string
}

func (e *StatusError) Error() string {
	msg := fmt.Sprintf("%s %s: HTTP %d", e.Method, e.Path, e.Status)
	if e.Message != "" {
		msg += ": " + e.Message
	}
	if e.RequestID != "" {
		msg += " (request id " + e.RequestID + ")"
	}
	return msg
}

// Transient reports whether retrying later may help (the server restarts,
// a proxy in front of it hiccups).
func (e *StatusError) Transient() bool {
	switch e.Status {
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout, http.StatusTooManyRequests, http.StatusInternalServerError:
		return true
	}
	return false
}

// IsTransient reports whether an error of a call may go away when the
// call is sent again: transport errors (refused connections, resets, one
// call's timeout) and the status codes of StatusError.Transient.
func IsTransient(err error) bool {
	var se *StatusError
	if errors.As(err, &se) {
		return se.Transient()
	}
	return true
}

// IsNotFound reports whether the API answered 404.
func IsNotFound(err error) bool {
	var se *StatusError
	return errors.As(err, &se) && se.Status == http.StatusNotFound
}

// NotJSONError is a 2xx answer that is not JSON: the base URL is likely
// not an Accord server (a wiki, a proxy's page).
type NotJSONError struct {
	Method, Path string
	MediaType    string
}

func (e *NotJSONError) Error() string {
	return fmt.Sprintf("%s %s: the server answered %s instead of JSON", e.Method, e.Path, e.MediaType)
}

// path is the API path of parts as errors show it (unescaped).
func path(parts []string) string { return "/api/v1/" + strings.Join(parts, "/") }

// endpoint is the URL of parts below /api/v1, each part escaped.
func (c *Client) endpoint(parts []string) string {
	segs := append([]string{"api", "v1"}, parts...)
	for i, p := range segs {
		segs[i] = url.PathEscape(p)
	}
	u := *c.base
	u.Path = c.base.Path + "/" + strings.Join(segs, "/")
	u.RawPath = ""
	return u.String()
}

// do sends body (JSON, when not nil) and decodes a 2xx answer into out
// (when not nil).
func (c *Client) do(ctx context.Context, method string, parts []string, header http.Header, body, out any) error {
	ctx, cancel := context.WithTimeout(ctx, c.requestTimeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("encode request: %w", err)
		}
		rd = bytes.NewReader(b)
	}
	p := path(parts)
	req, err := http.NewRequestWithContext(ctx, method, c.endpoint(parts), rd)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, p, err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	c.authorize(req)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, p, scrubURLError(err))
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, maxAnswer))
	if err != nil {
		return fmt.Errorf("%s %s: read the answer: %w", method, p, err)
	}
	if res.StatusCode < 200 || res.StatusCode > 299 {
		return statusError(method, p, res, raw)
	}
	if !isJSON(res.Header.Get("Content-Type")) {
		return &NotJSONError{Method: method, Path: p, MediaType: mediaType(res.Header.Get("Content-Type"))}
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("%s %s: decode the answer: %w", method, p, err)
		}
	}
	return nil
}

func (c *Client) authorize(req *http.Request) {
	req.Header.Set("Authorization", "Bearer "+c.token)
	if c.userAgent != "" {
		req.Header.Set("User-Agent", c.userAgent)
	}
}

func statusError(method, path string, res *http.Response, raw []byte) error {
	e := &StatusError{Method: method, Path: path, Status: res.StatusCode}
	var body struct {
		Error     string            `json:"error"`
		Fields    map[string]string `json:"fields"`
		RequestID string            `json:"request_id"`
	}
	if isJSON(res.Header.Get("Content-Type")) && json.Unmarshal(raw, &body) == nil && body.Error != "" {
		e.Message, e.Fields, e.RequestID = body.Error, body.Fields, body.RequestID
	} else {
		e.Message = fmt.Sprintf("%s (%s, not the Accord API's JSON)", http.StatusText(res.StatusCode), mediaType(res.Header.Get("Content-Type")))
	}
	return e
}

func isJSON(contentType string) bool { return mediaType(contentType) == "application/json" }

func mediaType(contentType string) string {
	mt, _, _ := strings.Cut(contentType, ";")
	mt = strings.TrimSpace(strings.ToLower(mt))
	if mt == "" {
		return "no content type"
	}
	return mt
}

// scrubURLError keeps the operation and cause of a transport error; the
// URL in it is the base URL's (which carries no credentials).
func scrubURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
