package parse

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/runners/probe/wire"
)

func TestDecodeRequestRecordAgreesWithEncodingJSON(t *testing.T) {
	t.Parallel()
	for _, line := range []string{
		`{"id":7,"t_sent":1000,"t_first_token":5000,"t_done":9000,"output_tokens":12,"chunks":12}` + "\n",
		`{"id":8,"warmup":true,"t_sent":1,"t_done":2}`,
		`{"id":9,"t_sent":1,"error_kind":"http","http_status":503}`,
		`{"id":10,"t_sent":1,"error":"stream \"cut\""}`,
		`{"id":11,"t_sent":1,"http_status":404,"extra":{"nested":[1,2]}}`,
	} {
		var got wire.RequestRecord
		failed, err := DecodeRequestRecord([]byte(line), &got)
		require.NoError(t, err, line)
		var want wire.RequestRecord
		require.NoError(t, json.Unmarshal([]byte(line), &want))
		require.Equal(t, want.ErrorKind != "" || want.Error != "" || want.HTTPStatus >= 400, failed, line)
		want.ErrorKind, want.Error = "", ""
		require.Equal(t, want, got, line)
	}
	var r wire.RequestRecord
	_, err := DecodeRequestRecord([]byte(`{"id":1.5}`), &r)
	require.Error(t, err)
}
