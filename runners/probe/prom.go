package probe

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

// promSample is one sample of the Prometheus text exposition format.
type promSample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// promFamily types by metric family name, from # TYPE lines.
type promDoc struct {
	Types   map[string]string
	Samples []promSample
}

// parsePromText parses the Prometheus text exposition format (version
// 0.0.4): # TYPE comments, samples with optional labels and timestamps.
// Our own small parser: the probe keeps its dependencies to the standard
// library, and the counters it needs are the simple part of the format.
func parsePromText(text string) (*promDoc, error) {
	doc := &promDoc{Types: map[string]string{}}
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
		s, err := parsePromSample(trimmed)
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

func parsePromSample(line string) (promSample, error) {
	var s promSample
	i := 0
	for i < len(line) && isNameChar(line[i], i == 0) {
		i++
	}
	if i == 0 {
		return s, fmt.Errorf("sample %q has no metric name", truncate(line, 60))
	}
	s.Name = line[:i]
	if i < len(line) && line[i] == '{' {
		labels, rest, err := parsePromLabels(line[i+1:])
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
	v, err := parsePromValue(f[0])
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

// parsePromLabels parses `a="x",b="y"}` and returns what follows the brace.
func parsePromLabels(s string) (map[string]string, string, error) {
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

func parsePromValue(s string) (float64, error) {
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

// key is the sample's series identity: name{labels sorted}.
func (s promSample) key() string {
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

// counters returns the monotonic series of a document: counters, and the
// _sum and _count of histograms and summaries; untyped series ending in
// _total count too.
func (d *promDoc) counters() map[string]float64 {
	out := map[string]float64{}
	for _, s := range d.Samples {
		if math.IsNaN(s.Value) || math.IsInf(s.Value, 0) {
			continue
		}
		if d.isCounter(s.Name) {
			out[s.key()] = s.Value
		}
	}
	return out
}

func (d *promDoc) isCounter(name string) bool {
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

// promDelta is the increase of every counter between two scrapes. A counter
// that went down was reset (the server restarted), so its increase is its
// new value; a series missing after is left out.
func promDelta(before, after *promDoc) map[string]float64 {
	b, a := before.counters(), after.counters()
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

// scrape fetches a Prometheus endpoint's text.
func scrape(ctx context.Context, url string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
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
	body, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
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
