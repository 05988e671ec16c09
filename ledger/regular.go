package ledger

import (
	"fmt"
	"os"
	"syscall"
)

// openRegular opens the file at name for reading without blocking and
// refuses what is not a regular file: a FIFO put at a ledger's path (or
// named as a rotated backup) made open(2) wait for a writer forever,
// holding `serve` before it listened, the writer's goroutine (every later
// record, and the shutdown that waits for it) or an /admin/usage read. The
// file is opened O_NONBLOCK, which changes nothing for a regular file, and
// checked on the descriptor it was opened as.
//
// Errors: the open's (fs.ErrNotExist when there is no file), the stat's,
// or "not a regular file", each naming name.
func openRegular(name string) (*os.File, error) {
	f, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("stat %s: %w", name, err)
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, notRegular(name, st)
	}
	return f, nil
}

// notRegular is the error for a ledger path that holds something other
// than a regular file.
func notRegular(name string, st os.FileInfo) error {
	return fmt.Errorf("%s: not a regular file (%s): a ledger is written to and read from a regular file", name, st.Mode().Type())
}
