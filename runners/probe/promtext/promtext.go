// Package promtext reads the Prometheus text exposition format (0.0.4):
// # TYPE comments and samples with optional labels and timestamps, the
// part of the format that scrapes of inference servers and accelerator
// exporters need. Our own small parser: the probe runs on lab hosts and
// keeps its dependencies to the standard library.
package promtext

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Sample is one sample of the Prometheus text exposition format.
type Sample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// Doc is a parsed exposition: metric types by family name (from # TYPE
// lines) and the samples.
type Doc struct {
	Types   map[string]string
	Samples []Sample
}

// Parse parses an exposition.
func Parse(text string) (*Doc, error) {
	doc := &Doc{Types: map[string]string{}}
	for n, line := range strings.Split(text, "\n") {
		line = strings.TrimRight(line, "\r")
		trimmed := strings.TrimSpace(line)
		if trimmed == "" {
			continue
		}
		if strings.HasPrefix(trimmed, "#") {
			f := strings.Fields(trimmed)
			if len(f) >= 4 && f[1] == "TYPE" {
				doc.Types[f[2]] = f[3]
			}
			continue
		}
		s, err := ParseSample(trimmed)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n+1, err)
		}
		doc.Samples = append(doc.Samples, s)
	}
	return doc, nil
}

func isNameChar(c byte, first bool) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '_', c == ':':
		return true
	case c >= '0' && c <= '9':
		return !first
	}
	return false
}

func ParseSample(line string) (Sample, error) {
	var s Sample
	i := 0
	for i < len(line) && isNameChar(line[i], i == 0) {
		i++
	}
	if i == 0 {
		return s, fmt.Errorf("sample %q has no metric name", truncate(line, 60))
	}
	s.Name = line[:i]
	if i < len(line) && line[i] == '{' {
		labels, rest, err := parseLabels(line[i+1:])
		if err != nil {
			return s, fmt.Errorf("metric %s: %w", s.Name, err)
		}
		s.Labels = labels
		line = rest
	} else {
		line = line[i:]
	}
	f := strings.Fields(line)
	if len(f) < 1 || len(f) > 2 {
		return s, fmt.Errorf("metric %s: want a value and an optional timestamp", s.Name)
	}
	v, err := parseValue(f[0])
	if err != nil {
		return s, fmt.Errorf("metric %s: %w", s.Name, err)
	}
	s.Value = v
	if len(f) == 2 {
		if _, err := strconv.ParseInt(f[1], 10, 64); err != nil {
			return s, fmt.Errorf("metric %s: timestamp %q", s.Name, f[1])
		}
	}
	return s, nil
}

// parseLabels parses `a="x",b="y"}` and returns what follows the brace.
func parseLabels(s string) (map[string]string, string, error) {
	labels := map[string]string{}
	i := 0
	for {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
			i++
		}
		if i < len(s) && s[i] == '}' {
			return labels, s[i+1:], nil
		}
		start := i
		for i < len(s) && isNameChar(s[i], i == start) {
			i++
		}
		if i == start {
			return nil, "", errors.New("bad label name")
		}
		name := s[start:i]
		for i < len(s) && s[i] == ' ' {
			i++
		}
		if i+1 >= len(s) || s[i] != '=' || s[i+1] != '"' {
			return nil, "", fmt.Errorf("label %s: want =\"value\"", name)
		}
		i += 2
		var val strings.Builder
		closed := false
		for i < len(s) {
			c := s[i]
			if c == '\\' && i+1 < len(s) {
				switch s[i+1] {
				case 'n':
					val.WriteByte('\n')
				case '\\':
					val.WriteByte('\\')
				case '"':
					val.WriteByte('"')
				default:
					val.WriteByte('\\')
					val.WriteByte(s[i+1])
				}
				i += 2
				continue
			}
			if c == '"' {
				closed = true
				i++
				break
			}
			val.WriteByte(c)
			i++
		}
		if !closed {
			return nil, "", fmt.Errorf("label %s: unterminated value", name)
		}
		labels[name] = val.String()
		for i < len(s) && s[i] == ' ' {
			i++
		}
		if i < len(s) && s[i] == ',' {
			i++
			continue
		}
		if i < len(s) && s[i] == '}' {
			return labels, s[i+1:], nil
		}
		return nil, "", errors.New("labels: want ',' or '}'")
	}
}

func parseValue(s string) (float64, error) {
	switch s {
	case "+Inf", "Inf":
		return math.Inf(1), nil
	case "-Inf":
		return math.Inf(-1), nil
	case "NaN":
		return math.NaN(), nil
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("value %q is not a number", truncate(s, 40))
	}
	return v, nil
}

// Key is the sample's series identity: name{labels sorted}.
func (s Sample) Key() string {
	if len(s.Labels) == 0 {
		return s.Name
	}
	names := make([]string, 0, len(s.Labels))
	for k := range s.Labels {
		names = append(names, k)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString(s.Name)
	b.WriteByte('{')
	for i, k := range names {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(k)
		b.WriteString(`="`)
		b.WriteString(strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s.Labels[k]))
		b.WriteByte('"')
	}
	b.WriteByte('}')
	return b.String()
}

// Counters returns the monotonic series of a document: counters, and the
// _sum and _count of histograms and summaries; untyped series ending in
// _total count too.
func (d *Doc) Counters() map[string]float64 {
	out := map[string]float64{}
	for _, s := range d.Samples {
		if math.IsNaN(s.Value) || math.IsInf(s.Value, 0) {
			continue
		}
		if d.isCounter(s.Name) {
			out[s.Key()] = s.Value
		}
	}
	return out
}

func (d *Doc) isCounter(name string) bool {
	if t, ok := d.Types[name]; ok {
		return t == "counter"
	}
	for _, suf := range []string{"_total", "_sum", "_count", "_created"} {
		base, ok := strings.CutSuffix(name, suf)
		if !ok {
			continue
		}
		switch d.Types[base] {
		case "counter":
			return suf != "_created"
		case "histogram", "summary":
			return suf == "_sum" || suf == "_count"
		case "":
			return suf == "_total" && d.Types[name] == ""
		}
	}
	return false
}

// Delta is the increase of every counter between two scrapes. A counter
// that went down was reset (the server restarted), so its increase is its
// new value; a series missing after is left out.
func Delta(before, after *Doc) map[string]float64 {
	b, a := before.Counters(), after.Counters()
	out := make(map[string]float64, len(a))
	for k, v := range a {
		prev, ok := b[k]
		switch {
		case !ok:
			out[k] = v
		case v < prev:
			out[k] = v
		default:
			out[k] = v - prev
		}
	}
	return out
}

// MaxScrape bounds the text read from one scrape.
const MaxScrape = 32 << 20

// Scrape fetches a Prometheus endpoint's text within timeout. It runs in
// the probe on a lab host, scraping that host's exporters: no call of the
// server's, so outside the server's egress policy.
func Scrape(ctx context.Context, url string, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", fmt.Errorf("scrape %s: %w", url, err)
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxScrape))
	if err != nil {
		return "", fmt.Errorf("scrape %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return string(body), fmt.Errorf("scrape %s: HTTP %d", url, resp.StatusCode)
	}
	return string(body), nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
