package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/accordlab/accord/runners/probe/facts"
	"github.com/accordlab/accord/store"
)

// A stop-loss record that does not decode does not make the run look as
// if no stop-loss stopped it: the run page says the record is unreadable.
func TestRunPageShowsAnUnreadableStopLoss(t *testing.T) {
	t.Parallel()
	b := setupReadiness(t)
	ctx := context.Background()
	run := b.finishedRun(t, b.tcp, b.tcpHost, store.RunFailed)
	// Valid JSON (the column is jsonb) that is no breach.
	require.NoError(t, b.store.RecordStopLoss(ctx, run, "not a breach"))

	_, page := b.get(t, b.viewer, b.url(fmt.Sprintf("/runs/%d", run)))
	require.Contains(t, page, `id="stop-loss"`)
	require.Contains(t, page, "stop-loss record that could not be read")

	// A run without a stop-loss shows none.
	plain := b.finishedRun(t, b.tcp, b.tcpHost, store.RunDone)
	_, page = b.get(t, b.viewer, b.url(fmt.Sprintf("/runs/%d", plain)))
	require.NotContains(t, page, `id="stop-loss"`)
}

// Facts that do not decode keep their step in the drift table, marked
// unreadable, beside the steps that do decode.
func TestFactsDriftShowsAnUnreadableCapture(t *testing.T) {
	t.Parallel()
	b := setupReadiness(t)
	host := b.addHost(t, "garbled", nil, "")
	first := b.finishedRun(t, b.tcp, host, store.RunDone)
	second := b.finishedRun(t, b.tcp, host, store.RunDone)
	third := b.finishedRun(t, b.tcp, host, store.RunDone)
	raw := fixtureFacts(t, "tcp-nogpu")
	b.addFacts(t, host, &first, raw)
	var f facts.Facts
	require.NoError(t, json.Unmarshal(raw, &f))
	f.NVMe.Multipath.Value = "N"
	changed, err := json.Marshal(&f)
	require.NoError(t, err)
	b.addFacts(t, host, &second, changed)
	b.addFacts(t, host, &third, []byte(`{"nvme": "not an object"}`))

	_, page := b.get(t, b.viewer, b.url(fmt.Sprintf("/hosts/%d", host)))
	drift := regexp.MustCompile(`(?s)<div class="panel" id="facts-drift">.*?</table>`).FindString(page)
	require.NotEmpty(t, drift)
	require.Regexp(t, `(?s)facts</td><td class="diff-del small">not compared</td><td class="diff-add small">unreadable</td>`, drift)
	require.Contains(t, drift, fmt.Sprintf(`href="%s">#%d</a>`, b.url(fmt.Sprintf("/runs/%d", third)), third))
	require.Regexp(t, `(?s)nvme\.multipath</td><td class="diff-del small">Y</td><td class="diff-add small">N</td>`, drift,
		"the readable step is still compared")
}
