package handlers

import (
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

// The help page's worked example is computed by the code the importers and
// pages use: p99 of 1..100 is 99 by nearest rank, 99.01 by numpy.
func TestHelpPagePercentileExample(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, body := b.get(t, b.client(t), "/help")
	require.Contains(t, body, `id="percentiles"`)
	row := regexp.MustCompile(`<tr><td>p99</td><td class="num">([^<]+)</td><td class="num">([^<]+)</td><td class="num">([^<]+)</td></tr>`).FindStringSubmatch(body)
	require.NotNil(t, row, "the example has a p99 row")
	require.Equal(t, []string{"99", "99.01", "99"}, row[1:], "nearest rank, numpy linear, fio's bin rule")
}
