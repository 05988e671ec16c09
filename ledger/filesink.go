package ledger

import (
	"bytes"
	"errors"
	"fmt"
	"io"
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
	m    *metrics
	lock *os.File // holds the ledger's lock (lockFile) until close
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
	s = &fileSink{
		lock: lock,
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
	}
	if o.maxBytes > 0 {
		s.maxBytes = o.maxBytes
	}
	s.out = s.lj
	if o.fileWriter != nil {
		s.out = o.fileWriter(s.lj)
	}
	f, err := os.Open(o.File)
	if os.IsNotExist(err) {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("ledger: open %s: %w", o.File, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("ledger: stat %s: %w", o.File, err)
	}
	s.size = st.Size()
	if s.size > 0 {
		last := make([]byte, 1)
		if _, err := f.ReadAt(last, s.size-1); err != nil && err != io.EOF {
			return nil, fmt.Errorf("ledger: read %s: %w", o.File, err)
		}
		s.torn = last[0] != '\n'
	}
	return s, nil
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
	if s.size > 0 && s.size+int64(len(s.buf)) >= s.maxBytes {
		if err := s.rotate(); err != nil {
			s.m.fileLost(s.lines)
			return err
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
