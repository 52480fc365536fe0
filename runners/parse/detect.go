package parse

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// Detect chooses the format of an uploaded output by its content: JSON lines
// of the probe's request records or telemetry, or of AIPerf's per-request
// export; fio's JSON (also with text
// before it); vLLM's benchmark result; GenAI-Perf's or AIPerf's export;
// gdsio's text; the probe's gpu-path result.
// The user may still force a format with Import.
func Detect(data []byte) (Format, error) {
	return detectHead(data, int64(len(data)))
}

// detectHead detects from the first bytes of an input of the given size: a
// JSON-lines format is known by its first line; a single JSON document must
// be whole (and within MaxToolJSONBytes).
func detectHead(head []byte, size int64) (Format, error) {
	t := bytes.TrimLeft(head, " \t\r\n\ufeff")
	if len(t) == 0 {
		return "", errors.New("detect: the input is empty")
	}
	if t[0] != '{' {
		// fio prints notes and warnings before its JSON.
		if _, skipped := fioJSONStart(head); skipped > 0 && bytes.Contains(head, []byte(`"fio version"`)) {
			return FormatFio, nil
		}
		// gdsio's summary lines.
		if bytes.Contains(head, []byte("XferType:")) && bytes.Contains(head, []byte("Throughput:")) {
			return FormatGdsio, nil
		}
		if isFioNormalText(head) {
			return "", errors.New("detect: " + fioNormalTextError)
		}
		return "", fmt.Errorf("detect: not JSON (starts with %q): upload fio, vLLM, GenAI-Perf or AIPerf JSON, gdsio's text, or the probe's JSON lines", clip(t, 20))
	}
	// JSON lines: the first line is a whole object and more follow, or the
	// first line's keys give it away.
	if i := bytes.IndexByte(t, '\n'); i > 0 {
		first := bytes.TrimSpace(t[:i])
		var obj map[string]json.RawMessage
		if json.Unmarshal(first, &obj) == nil {
			if f, ok := jsonLinesFormat(obj); ok {
				return f, nil
			}
		}
	} else {
		var obj map[string]json.RawMessage
		if json.Unmarshal(bytes.TrimSpace(t), &obj) == nil {
			if f, ok := jsonLinesFormat(obj); ok {
				return f, nil
			}
		}
	}
	if size > MaxToolJSONBytes {
		return "", fmt.Errorf("detect: %w: a %d-byte JSON document is over the %s limit for tool outputs", ErrTooLarge, size, humanBytes(MaxToolJSONBytes))
	}
	if int64(len(head)) < size {
		return "", errNeedWhole
	}
	body, _ := nullNonFinite(t)
	var top map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&top); err != nil {
		return "", fmt.Errorf("detect: %w", jsonErr(err))
	}
	switch {
	case isFioDoc(top):
		return FormatFio, nil
	case isVLLMDoc(top):
		return FormatVLLMBench, nil
	case isGPUPathDoc(top):
		return FormatGPUPath, nil
	}
	if f, ok := isPerfDoc(top); ok {
		return f, nil
	}
	keys := sortedKeys(top)
	if len(keys) > 8 {
		keys = append(keys[:8], "…")
	}
	return "", fmt.Errorf("detect: unrecognised JSON (top-level keys %q): choose the format by hand", keys)
}

// DetectError is a format that could not be told from an input's
// content: the caller may name the format instead.
type DetectError struct{ Err error }

func (e *DetectError) Error() string { return e.Err.Error() }
func (e *DetectError) Unwrap() error { return e.Err }

// errNeedWhole says a single JSON document must be read whole to be detected.
var errNeedWhole = errors.New("detect: the document is larger than the bytes read to detect it")

func jsonLinesFormat(obj map[string]json.RawMessage) (Format, bool) {
	has := func(k string) bool { _, ok := obj[k]; return ok }
	switch {
	case has("t_sent") || has("t_done") || has("t_intended"):
		return FormatProbeRequests, true
	case has("cpu_pct") && has("t"):
		return FormatProbeTelemetry, true
	case has("metadata") && has("metrics"):
		return FormatAIPerfRecords, true
	}
	return "", false
}

func clip(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}

// isGPUPathDoc: the probe's gpu-path result (wire.GPUPathResult), as a
// gpu-path step or a vendor tool's wrapper writes it.
func isGPUPathDoc(top map[string]json.RawMessage) bool {
	modes, ok := top["modes"]
	if !ok {
		return false
	}
	var list []map[string]json.RawMessage
	if json.Unmarshal(modes, &list) != nil || len(list) == 0 {
		return false
	}
	_, ok = list[0]["mode"]
	return ok
}
