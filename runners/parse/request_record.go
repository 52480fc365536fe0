package parse

import "github.com/accordlab/accord/runners/probe/wire"

// DecodeRequestRecord decodes one line of the probe's requests.jsonl with
// the importer's own decoder (recordscan.go: what encoding/json accepts,
// without reflection), for readers that need each request's times, such as
// the charts computed at ingest. The error fields are not decoded (r's
// ErrorKind and Error stay empty): failed says whether the record is a
// failed request, as the importer counts it (error_kind or error set, or
// an HTTP status of 400 or more).
func DecodeRequestRecord(line []byte, r *wire.RequestRecord) (failed bool, err error) {
	var rec recordLine
	if err := decodeRecordLine(line, &rec); err != nil {
		return false, err
	}
	*r = rec.RequestRecord
	return len(rec.errorKind) > 0 || rec.errorText || rec.HTTPStatus >= 400, nil
}
