package config

import (
	"fmt"
	"io"
	"os"
	"syscall"
)

// MaxFileBytes bounds a config or prices file llmguard reads, in bytes.
// A config of 10,000 keys and 1,000 limits is a few MiB; a path that
// points at something far larger (a log, a disk image) must not be read
// whole into memory, at start or at every reload.
const MaxFileBytes = 64 << 20

// ReadFile reads the regular file at path, at most limit bytes. It refuses,
// without blocking, what is not a regular file: a FIFO (whose open would
// wait for a writer forever, holding a reload, the signal loop or a
// shutdown), a device, a directory, a socket. The file is opened
// O_NONBLOCK, which changes nothing for a regular file, and checked on the
// descriptor it was opened as, so a file swapped meanwhile is not read
// unchecked. Errors: the open's, "not a regular file", "larger than limit
// bytes", or the read's; each names path.
func ReadFile(path string, limit int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file (%s)", path, fi.Mode().Type())
	}
	if fi.Size() > limit {
		return nil, fmt.Errorf("%s: %d bytes, larger than %d", path, fi.Size(), limit)
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, limit)
	}
	return b, nil
}
