package parse

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Tools write non-JSON numbers: Python's json.dump writes NaN, Infinity and
// -Infinity, fio's printf writes nan, -nan, inf. encoding/json rejects the
// whole document for one of them, so they are turned into null first; a
// field Accord needs that is null is then an error naming the field, and
// nothing non-finite is ever accepted.
var nonFinite = [][]byte{
	[]byte("-Infinity"), []byte("Infinity"), []byte("-NaN"), []byte("NaN"),
	[]byte("-nan"), []byte("nan"), []byte("-inf"), []byte("inf"),
}

// nullNonFinite returns data with bare non-finite number tokens (outside
// strings) replaced by null, and how many were replaced. data is not
// modified; it is returned as is when there is nothing to replace.
func nullNonFinite(data []byte) ([]byte, int) {
	var out []byte
	n := 0
	last := 0
	inStr := false
	for i := 0; i < len(data); i++ {
		c := data[i]
		if inStr {
			switch c {
			case '\\':
				i++
			case '"':
				inStr = false
			}
			continue
		}
		switch c {
		case '"':
			inStr = true
			continue
		case '-', 'N', 'I', 'n', 'i':
		default:
			continue
		}
		// a token can only start after a separator
		if i > 0 {
			p := data[i-1]
			if p != ':' && p != ',' && p != '[' && p != ' ' && p != '\t' && p != '\n' && p != '\r' {
				continue
			}
		}
		for _, tok := range nonFinite {
			if bytes.HasPrefix(data[i:], tok) {
				end := i + len(tok)
				if end < len(data) && isTokenChar(data[end]) {
					continue
				}
				if out == nil {
					out = make([]byte, 0, len(data))
				}
				out = append(out, data[last:i]...)
				out = append(out, "null"...)
				last = end
				i = end - 1
				n++
				break
			}
		}
	}
	if out == nil {
		return data, 0
	}
	return append(out, data[last:]...), n
}

func isTokenChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.'
}

// decodeOne decodes exactly one JSON document from data into v. More than
// one document (vLLM's --append-result, fio run twice into one file) is an
// error, and so is anything after it but whitespace.
func decodeOne(data []byte, v any) error {
	after, err := decodeFirst(data, v)
	if err != nil {
		return err
	}
	if after > 0 {
		return fmt.Errorf("unexpected data after the JSON document at byte %d", len(data)-after+1)
	}
	return nil
}

// decodeFirst decodes the first JSON document of data and returns how many
// bytes of text (whitespace trimmed) follow it: text after it is the
// caller's to allow (fio's normal output); a second JSON document is an
// error.
func decodeFirst(data []byte, v any) (int, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return 0, jsonErr(err)
	}
	rest := bytes.TrimSpace(data[dec.InputOffset():])
	if len(rest) > 0 && rest[0] == '{' {
		n := 1
		for {
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				return 0, fmt.Errorf("unexpected data after the JSON document")
			}
			n++
		}
		return 0, fmt.Errorf("the file holds %d JSON documents (results appended to one file?): import one at a time", n)
	}
	return len(rest), nil
}
