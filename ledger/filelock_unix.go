//go:build unix

package ledger

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// lockFile takes an exclusive advisory lock (flock(2)) on path's lock
// file, path + ".lock", created when missing, and returns the file that
// holds it: closing that file releases the lock, and so does the process's
// exit. The lock is not on the ledger file itself, which rotation renames.
// path is resolved first (symbolic links, in the file's name or its
// directories), so two names of one file share one lock.
//
// Errors: errLedgerInUse (wrapped, naming path) when another open file,
// in this or another process, holds the lock; the lock file cannot be
// opened or locked.
func lockFile(path string) (*os.File, error) {
	name := resolved(path) + ".lock"
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("ledger: open %s: %w", name, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("ledger: %s is written by another process (locked through %s): %w", path, name, errLedgerInUse)
		}
		return nil, fmt.Errorf("ledger: lock %s: %w", name, err)
	}
	return f, nil
}

// resolved is path with its symbolic links followed: the file's, when it
// exists, else its directory's (the file is then made there); path itself
// when neither resolves.
func resolved(path string) string {
	if r, err := filepath.EvalSymlinks(path); err == nil {
		return r
	}
	if dir, err := filepath.EvalSymlinks(filepath.Dir(path)); err == nil {
		return filepath.Join(dir, filepath.Base(path))
	}
	return path
}
