//go:build linux

package emulator

import (
	"errors"
	"os"
	"syscall"
)

// openDirect opens path for reading with O_DIRECT, so that reads reach the
// device instead of the page cache; it falls back to buffered reads where
// the filesystem refuses O_DIRECT (reported as false).
func openDirect(path string) (*os.File, bool, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_DIRECT, 0)
	if err == nil {
		return f, true, nil
	}
	if !errors.Is(err, syscall.EINVAL) {
		return nil, false, err
	}
	f, err = os.Open(path)
	return f, false, err
}
