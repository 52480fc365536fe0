package loadgen

import (
	"strconv"

	"github.com/accordlab/accord/runners/probe/wire"
)

// appendRecord appends r as one JSON line, with the field names and
// omitempty rules of wire.RequestRecord's tags, without reflection: at tens
// of thousands of requests per second encoding/json would be a visible cost.
// TestAppendRecordMatchesEncodingJSON keeps the two in step.
func appendRecord(b []byte, r *wire.RequestRecord) []byte {
	b = append(b, `{"id":`...)
	b = strconv.AppendInt(b, r.ID, 10)
	if r.Warmup {
		b = append(b, `,"warmup":true`...)
	}
	b = appendIntField(b, `,"t_intended":`, r.Intended)
	b = appendIntField(b, `,"t_sent":`, r.Sent)
	b = appendIntField(b, `,"t_first_chunk":`, r.FirstChunk)
	b = appendIntField(b, `,"t_first_token":`, r.FirstToken)
	b = appendIntField(b, `,"t_first_content":`, r.FirstContent)
	b = appendIntField(b, `,"t_last_token":`, r.LastToken)
	b = appendIntField(b, `,"t_done":`, r.Done)
	b = appendIntField(b, `,"prompt_tokens":`, int64(r.PromptTokens))
	b = appendIntField(b, `,"output_tokens":`, int64(r.OutputTokens))
	if r.UsageCounted {
		b = append(b, `,"usage_counted":true`...)
	}
	b = appendIntField(b, `,"chunks":`, int64(r.Chunks))
	if r.ErrorKind != "" {
		b = append(b, `,"error_kind":"`...)
		b = appendJSONStringBody(b, r.ErrorKind)
		b = append(b, '"')
	}
	if r.Error != "" {
		b = append(b, `,"error":"`...)
		b = appendJSONStringBody(b, r.Error)
		b = append(b, '"')
	}
	if r.HTTPStatus != 0 {
		b = appendIntField(b, `,"http_status":`, int64(r.HTTPStatus))
	}
	return append(b, '}', '\n')
}

func appendIntField(b []byte, name string, v int64) []byte {
	b = append(b, name...)
	return strconv.AppendInt(b, v, 10)
}
