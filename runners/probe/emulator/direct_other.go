//go:build !linux

package emulator

import "os"

// openDirect reads through the page cache where O_DIRECT is not available.
func openDirect(path string) (*os.File, bool, error) {
	f, err := os.Open(path)
	return f, false, err
}
