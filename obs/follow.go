package obs

import (
	"fmt"
	"os"
	"sync"
	"time"

	"gopkg.in/natefinch/lumberjack.v2"
)

// followEvery is the least time between two looks at an access log file's
// path (one stat(2) each): a file removed or moved is made again at its
// path within about this long.
const followEvery = time.Second

// followingFile is an access log file: a lumberjack.Logger that follows its
// path. lumberjack keeps writing to the descriptor it opened, so lines
// written after the file was removed or moved (rm, a cleanup job,
// logrotate without copytruncate) went to the unlinked or moved file until
// the next rotation, up to max_size_mb later. A Write at least followEvery
// after the last look stats the path and, when the file there is not the
// one last written (none, or another), closes lumberjack's file, so that
// this write opens the path afresh (lumberjack creates it when missing).
// A rotation of lumberjack's own reads as another file: its next look
// closes and reopens the new file, losing nothing. Safe for concurrent use.
type followingFile struct {
	mu sync.Mutex
	lj *lumberjack.Logger
	// known is the file at the path as stat'ed after the write that
	// followed the last look; nil before the first write and after a failed
	// stat (the next look then reopens).
	known os.FileInfo
	// looked is when the path was last looked at.
	looked time.Time
	now    func() time.Time // time.Now; a test's clock
}

// newFollowingFile returns a followingFile writing through lj.
func newFollowingFile(lj *lumberjack.Logger) *followingFile {
	return &followingFile{lj: lj, now: time.Now}
}

// Write writes p to the file at the path, looking first when followEvery
// has passed since the last look. Errors: lumberjack's (opening or writing
// the file); "not a regular file" when it would open the path and a
// directory, device or FIFO is there.
func (f *followingFile) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	look := false
	if now := f.now(); now.Sub(f.looked) >= followEvery {
		f.looked, look = now, true
		if f.known != nil {
			st, err := os.Stat(f.lj.Filename)
			if err != nil || !os.SameFile(st, f.known) {
				f.lj.Close() // the write below opens the path; a close error has nowhere better to go
				f.known = nil
			}
		}
	}
	if f.known == nil {
		// lumberjack opens the path at this write (the first, or after the
		// file left it), O_WRONLY without O_NONBLOCK: on a FIFO put there
		// that waits for a reader forever, holding mu and so every
		// request's access line (adv48: every proxied request hung). What
		// is at the path is checked first; the line is lost while it is
		// not a regular file.
		if st, err := os.Stat(f.lj.Filename); err == nil && !st.Mode().IsRegular() {
			f.lj.Close()
			return 0, notRegular(f.lj.Filename, st)
		}
	}
	n, err := f.lj.Write(p)
	if n > 0 && (look || f.known == nil) {
		f.known, _ = os.Stat(f.lj.Filename) // nil on error: the next look reopens
	}
	return n, err
}

// Close closes the file.
func (f *followingFile) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lj.Close()
}

// notRegular is the error for an access log path that holds something
// other than a regular file.
func notRegular(name string, st os.FileInfo) error {
	return fmt.Errorf("obs: access log %s is not a regular file (%s): name a file, or \"stdout\" or \"stderr\" for the process's own streams", name, st.Mode().Type())
}
