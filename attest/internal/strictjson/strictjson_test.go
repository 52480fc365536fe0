package strictjson

import (
	"testing"

	"github.com/stretchr/testify/require"
)

type doc struct {
	A string `json:"a"`
	B []struct {
		C int `json:"c"`
	} `json:"b"`
}

func TestDecode(t *testing.T) {
	t.Parallel()
	var d doc
	require.NoError(t, Decode([]byte(` {"a":"x","b":[{"c":1},{"c":2}]} `), &d))
	require.Equal(t, "x", d.A)
	require.Len(t, d.B, 2)

	for name, in := range map[string]string{
		"duplicate top-level key": `{"a":"x","a":"y"}`,
		"duplicate nested key":    `{"a":"x","b":[{"c":1,"c":2}]}`,
		"unknown field":           `{"a":"x","z":1}`,
		"trailing value":          `{"a":"x"}{"a":"y"}`,
		"truncated":               `{"a":"x"`,
		"empty":                   ``,
	} {
		require.Error(t, Decode([]byte(in), &doc{}), name)
	}
}
