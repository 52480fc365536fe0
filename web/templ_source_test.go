package web

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/a-h/templ/parser/v2"
	"github.com/a-h/templ/parser/v2/visitor"
	"github.com/stretchr/testify/require"
)

// Every { expression } of every template is the Go code written at its
// place in the .templ file. templ v0.3.1100 read Go code past the closing
// brace, so that `{ d.Customer } (customer). Signed { d.SignedAt }` parsed
// as a call and a composite literal and printed d.SignedAt in the place of
// d.Customer (the report header bug); this catches that kind of misparse in
// any template.
func TestTemplateExpressionsAreTheirSource(t *testing.T) {
	t.Parallel()
	var files []string
	require.NoError(t, filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".templ") {
			files = append(files, path)
		}
		return err
	}))
	require.NotEmpty(t, files)
	checked := 0
	for _, path := range files {
		src, err := os.ReadFile(path)
		require.NoError(t, err)
		tf, err := parser.ParseString(string(src))
		require.NoError(t, err, path)
		v := visitor.New()
		v.StringExpression = func(n *parser.StringExpression) error {
			r := n.Expression.Range
			written := string(src[r.From.Index:r.To.Index])
			require.Equal(t, strings.TrimSpace(written), strings.TrimSpace(n.Expression.Value),
				"%s line %d: the expression templ generates is not the one written there", path, r.From.Line+1)
			checked++
			return nil
		}
		require.NoError(t, tf.Visit(v), path)
	}
	require.Greater(t, checked, 100, "string expressions checked")
}
