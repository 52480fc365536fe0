package handlers

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The spool keeps exactly the bytes a file announced: a shorter stream is
// an error, the bytes past the size of a longer one are not read, in
// memory and in its temporary folder alike.
func TestImportSpoolKeepsExactlyTheAnnouncedSize(t *testing.T) {
	t.Parallel()
	spool, err := newImportSpool()
	require.NoError(t, err)
	t.Cleanup(func() { _ = spool.remove() })
	ctx := context.Background()

	require.ErrorContains(t, spool.sink(ctx, "short", 10, strings.NewReader("12345")), "5 bytes where 10 were announced")
	require.NoError(t, spool.sink(ctx, "long", 4, strings.NewReader("123456789")))
	big := strings.Repeat("x", importSpoolMemory+10)
	require.ErrorContains(t, spool.sink(ctx, "short-on-disk", int64(len(big))+1, strings.NewReader(big)), "were announced")
	require.NoError(t, spool.sink(ctx, "on-disk", int64(len(big)), strings.NewReader(big+"tail")))

	files := spool.collection().Files
	require.Len(t, files, 2)
	require.Equal(t, "long", files[0].Name)
	require.Equal(t, []byte("1234"), files[0].Data)
	require.Equal(t, "on-disk", files[1].Name)
	require.NotEmpty(t, files[1].Path, "past the memory budget: a temporary file")
	require.EqualValues(t, len(big), files[1].Size)
	require.EqualValues(t, 4+len(big), spool.total, "a failed file takes none of the budget")
}
