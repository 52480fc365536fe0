package emulator

import "unsafe"

// addressOf returns the address of b's first byte, to align O_DIRECT buffers.
func addressOf(b []byte) uintptr { return uintptr(unsafe.Pointer(&b[0])) }
