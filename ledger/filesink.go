package ledger

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"gopkg.in/natefinch/lumberjack.v2"
)

// errLedgerInUse is the error New returns, wrapped with the file's name,
// when another writer holds the ledger file: two processes appending to
// one file each write at their own offset, over each other's lines
// (lumberjack creates the file without O_APPEND), and a rotation by one
// moves the file from under the other. Each node needs its own file, or a
// Redis stream.
var errLedgerInUse = errors.New("each llmguard node needs its own ledger.file, or ledger.redis_stream")

// maxChunk is the most bytes the file sink hands to one write (64 KiB).
const maxChunk = 64 << 10

// fileSink appends whole lines to a lumberjack.Logger. It buffers lines
// itself (not with a bufio.Writer) so that a write never ends mid-line: a
// rotation can only fall between two records, and no record is split across
// two files.
//
// It rotates the file itself, before a chunk that would take the file to
// maxBytes, rather than letting lumberjack do it: lumberjack names a backup
// after the current millisecond and a second rotation in the same
// millisecond would overwrite the first backup, so rotate waits for the next
// millisecond. Not safe for concurrent use: only the Writer's goroutine uses
// it.
type fileSink struct {
	lj         *lumberjack.Logger
	out        io.Writer // lj, or a test's wrapper of it
	maxBytes   int64     // rotate before the file reaches this size
	size       int64     // bytes in the current file, as written by this sink
	lastRotate time.Time // when this sink last rotated (or was opened)

	buf   []byte // whole lines not yet written
	lines int    // records in buf
	// torn is set while the file ends mid-line: a crash before open, or a
	// short write (a full disk: ENOSPC after part of a chunk). The next
	// chunk then starts with a newline, so that the torn line does not
	// swallow the record after it.
	torn bool
	// known is the file at the path as stat'ed after this sink's first
	// write to it (or its rotation); nil before, and after a failed stat.
	// follow compares the path with it before each write.
	known os.FileInfo
	// written is set by a write (lumberjack then holds the file open, or
	// failed to open it); with known nil follow cannot tell which file
	// lumberjack holds, and reopens the path.
	written bool
	m       *metrics
	log     *slog.Logger
	lock    *os.File // holds the ledger's lock (lockFile) until close
	// lockKnown is lock's file as stat'ed when taken; followLock compares
	// the lock path with it before each write. lockLost is set while the
	// path names another file (or none) and taking it again has failed,
	// so that the failure is logged once, not at every flush.
	lockKnown os.FileInfo
	lockLost  bool
}

// openFileSink prepares a sink for the file at path (created on the first
// write). When the file exists and does not end in a newline (a crash in the
// middle of a line), the first write starts with one, so that the torn line
// does not swallow the next record.
//
// The sink holds a lock on the file (lockFile) until it is closed.
//
// Errors: another process, or another sink of this one, writes the file
// (errLedgerInUse); the file exists but cannot be read.
func openFileSink(o Options, m *metrics) (s *fileSink, err error) {
	lock, err := lockFile(o.File)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil && lock != nil {
			lock.Close()
		}
	}()
	var lockKnown os.FileInfo // nil where there is no lock (lockFile's non-unix version)
	if lock != nil {
		if lockKnown, err = lock.Stat(); err != nil {
			return nil, fmt.Errorf("ledger: stat %s: %w", lock.Name(), err)
		}
	}
	s = &fileSink{
		lock:      lock,
		lockKnown: lockKnown,
		lj: &lumberjack.Logger{
			Filename:   o.File,
			MaxSize:    o.MaxSizeMB,
			MaxBackups: o.MaxBackups,
			MaxAge:     o.MaxAgeDays,
			Compress:   o.Compress,
		},
		maxBytes:   int64(o.MaxSizeMB) << 20,
		lastRotate: time.Now(),
		buf:        make([]byte, 0, maxChunk),
		m:          m,
		log:        o.Logger,
	}
	if o.maxBytes > 0 {
		s.maxBytes = o.maxBytes
	}
	s.out = s.lj
	if o.fileWriter != nil {
		s.out = o.fileWriter(s.lj)
	}
	if s.size, s.torn, err = fileEnd(o.File); err != nil {
		return nil, err
	}
	return s, nil
}

// fileEnd returns the size of the file at path in bytes and whether it ends
// mid-line (torn: not empty and its last byte no newline); 0 and false when
// there is no file.
//
// Errors: the file exists but cannot be read, or is not a regular file
// (openRegular), with its name.
func fileEnd(path string) (size int64, torn bool, err error) {
	f, err := openRegular(path)
	if os.IsNotExist(err) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("ledger: %w", err) // names path
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, false, fmt.Errorf("ledger: stat %s: %w", path, err)
	}
	if st.Size() == 0 {
		return 0, false, nil
	}
	last := make([]byte, 1)
	if _, err := f.ReadAt(last, st.Size()-1); err != nil && err != io.EOF {
		return 0, false, fmt.Errorf("ledger: read %s: %w", path, err)
	}
	return st.Size(), last[0] != '\n', nil
}

// follow makes the next write go to the file at the sink's path when the
// file being written is no longer there: removed (an operator's rm, a
// cleanup job), or moved and perhaps replaced (logrotate without
// copytruncate). lumberjack keeps writing to the descriptor it opened, so
// records written after a removal went to an unlinked file, counted as
// written and lost, until the next rotation; after a move they grew the
// moved file, which ReadFiles does not read. follow closes lumberjack's file
// (its next write opens the path, creating it when missing) and takes the
// size and torn state of whatever file is now at the path. It costs one
// stat per flush (at most every 100 ms, or every 64 KiB chunk).
//
// A file removed and replaced between a write and the stat after it is
// not seen (the stat then names the replacement); such a swap within
// microseconds is not what rm or logrotate do.
func (s *fileSink) follow() {
	if !s.written {
		return
	}
	st, err := os.Stat(s.lj.Filename)
	if err == nil && s.known != nil && os.SameFile(st, s.known) {
		return
	}
	if cerr := s.lj.Close(); cerr != nil {
		s.log.Warn("ledger: close the file that left its path", "file", s.lj.Filename, "error", cerr)
	}
	seen := s.known != nil // else the last stat failed: nothing is known to have moved
	s.written, s.known = false, nil
	size, torn, eerr := fileEnd(s.lj.Filename)
	if eerr != nil { // lumberjack's open will fail too, and say why
		size, torn = 0, false
	}
	s.size, s.torn = size, torn
	if seen {
		s.log.Warn("ledger: the file was removed or moved: writing to a file at its path again",
			"file", s.lj.Filename, "exists", err == nil, "size", size)
	}
}

// followLock takes the ledger's lock again when its lock file (lockFile's
// path + ".lock") is no longer the one this sink holds: a cleanup that
// removed "*.lock", or the directory emptied. The flock(2) lock lives on
// the removed file's inode, so a second llmguard started on the same
// ledger.file made a new lock file, locked it and wrote into the same
// file beside this one. followLock costs one stat per flush, as follow
// does. When the new lock file is held by another process already, the
// ERROR names the file; this sink keeps writing (its records are not
// dropped) and tries again at each flush without logging again.
func (s *fileSink) followLock() {
	if s.lock == nil {
		return
	}
	name := s.lock.Name()
	if st, err := os.Stat(name); err == nil && os.SameFile(st, s.lockKnown) {
		return
	}
	lock, err := lockFile(s.lj.Filename)
	if err == nil {
		var known os.FileInfo
		if known, err = lock.Stat(); err != nil {
			lock.Close()
		} else {
			s.lock.Close()
			s.lock, s.lockKnown, s.lockLost = lock, known, false
			s.log.Warn("ledger: the lock file was removed or moved: locked again", "file", s.lj.Filename, "lock", lock.Name())
			return
		}
	}
	if !s.lockLost {
		s.lockLost = true
		s.log.Error("ledger: the lock file was removed or moved and cannot be taken again: another writer may share the file", "file", s.lj.Filename, "error", err)
	}
}

// chunk is the most bytes written at once: maxChunk, or less when files are
// smaller than that.
func (s *fileSink) chunk() int {
	return int(min(int64(maxChunk), max(s.maxBytes, 1)))
}

// add queues one encoded line (with its newline), writing the lines queued
// before it first when the chunk would overflow.
func (s *fileSink) add(line []byte) error {
	var err error
	if len(s.buf) > 0 && len(s.buf)+len(line) > s.chunk() {
		err = s.flush()
	}
	s.buf = append(s.buf, line...)
	s.lines++
	return err
}

// flush writes the queued lines, rotating first when they would take the
// file to maxBytes, and starting with a newline when the file ends mid-line
// (torn). Lines that cannot be written are counted as errors and dropped: a
// full disk must not grow memory without bound. A short write (ENOSPC part
// way through) counts the lines it wrote whole as records and leaves the
// file torn.
//
// Errors: from rotation or the write, with the file name.
func (s *fileSink) flush() error {
	if len(s.buf) == 0 {
		return nil
	}
	defer func() { s.buf, s.lines = s.buf[:0], 0 }()
	s.followLock()
	s.follow()
	if s.size > 0 && s.size+int64(len(s.buf)) >= s.maxBytes {
		if err := s.rotate(); err != nil {
			s.m.fileLost(s.lines)
			return err
		}
	}
	if !s.written {
		// lumberjack opens the path at this write, O_WRONLY without
		// O_NONBLOCK: on a FIFO that waits for a reader forever (see
		// openRegular). What is there is checked first; a file swapped in
		// between this stat and that open is not seen.
		if st, err := os.Stat(s.lj.Filename); err == nil && !st.Mode().IsRegular() {
			s.m.fileLost(s.lines)
			return fmt.Errorf("ledger: write %w", notRegular(s.lj.Filename, st))
		}
	}
	lead := s.torn // a newline ends the torn line first
	if lead {
		s.buf = append(s.buf, 0)
		copy(s.buf[1:], s.buf)
		s.buf[0] = '\n'
	}
	n, err := s.out.Write(s.buf)
	s.size += int64(n)
	s.written = true // lumberjack opened the file, or will try again
	if s.known == nil {
		s.known, _ = os.Stat(s.lj.Filename) // nil on error: follow reopens
	}
	if err != nil {
		whole := 0 // records written whole
		if n > 0 {
			whole = bytes.Count(s.buf[:n], newline)
			if lead {
				whole-- // the newline that ended the torn line is no record
			}
			s.torn = s.buf[n-1] != '\n'
		}
		s.m.fileRecords.Add(float64(whole))
		s.m.fileLost(s.lines - whole)
		return fmt.Errorf("ledger: write %s: %w", s.lj.Filename, err)
	}
	s.torn = false
	s.m.fileRecords.Add(float64(s.lines))
	s.m.tally.ok(sinkFile)
	return nil
}

// newline ends every record's line.
var newline = []byte{'\n'}

// rotate moves the current file aside as a timestamped backup, never twice
// in one millisecond (see fileSink).
func (s *fileSink) rotate() error {
	for now := time.Now(); now.UnixMilli() <= s.lastRotate.UnixMilli(); now = time.Now() {
		time.Sleep(time.Millisecond - time.Duration(now.Nanosecond())%time.Millisecond)
	}
	err := s.lj.Rotate()
	s.lastRotate = time.Now() // not before lumberjack's clock read for the name
	if err != nil {
		return fmt.Errorf("ledger: rotate %s: %w", s.lj.Filename, err)
	}
	s.size, s.torn = 0, false
	s.known, _ = os.Stat(s.lj.Filename) // the new file lumberjack opened; nil on error: follow reopens
	return nil
}

// close flushes and closes the file.
func (s *fileSink) close() error {
	err := s.flush()
	if cerr := s.lj.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("ledger: close %s: %w", s.lj.Filename, cerr)
	}
	if s.lock != nil {
		s.lock.Close()
	}
	return err
}
