package ingest

import (
	"fmt"
	"io"

	"github.com/accordlab/accord/runners/sshrun"
)

// Files are a run folder's files by path (relative to the folder),
// for the aggregates that need raw records: the send time of every
// request, the telemetry samples.
type Files interface {
	Names() []string
	Open(name string) (io.ReadCloser, error)
}

type collectionFiles struct{ c *sshrun.Collection }

// CollectionFiles reads a collected run folder: files stay where the
// collection keeps them (in memory or in a temporary file) and are
// streamed.
func CollectionFiles(c *sshrun.Collection) Files { return collectionFiles{c} }

func (f collectionFiles) Names() []string {
	names := make([]string, len(f.c.Files))
	for i, x := range f.c.Files {
		names[i] = x.Name
	}
	return names
}

func (f collectionFiles) Open(name string) (io.ReadCloser, error) {
	x, ok := f.c.File(name)
	if !ok {
		return nil, fmt.Errorf("%s is not in the run folder", name)
	}
	return x.Open()
}
