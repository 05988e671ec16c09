package ledger

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// MaxLine is the longest line ReadLines parses, in bytes (1 MiB); a longer
// line is skipped as bad. A record is a few hundred bytes.
const MaxLine = 1 << 20

// backupTimeFormat is lumberjack's timestamp in backup names.
const backupTimeFormat = "2006-01-02T15-04-05.000"

// ReadLines reads JSON lines from r and calls fn with each record, in order.
// A line that is not a JSON object with a "ts" (garbage, a line torn by a
// crash, typically the last one, or a line longer than MaxLine) is skipped
// and counted in bad; unknown keys are ignored. It never panics on any
// input.
//
// Errors: r's read errors (the records before them have been passed to fn).
func ReadLines(r io.Reader, fn func(Record)) (bad int, err error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var long []byte // a line longer than br's buffer, being assembled
	tooLong := false
	for {
		frag, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			if len(long)+len(frag) > MaxLine {
				long, tooLong = nil, true // keeps memory bounded
			} else if !tooLong {
				long = append(long, frag...)
			}
			continue
		}
		if err != nil && err != io.EOF {
			return bad, fmt.Errorf("ledger: read lines: %w", err)
		}
		line := frag
		if tooLong || long != nil {
			if tooLong || len(long)+len(frag) > MaxLine {
				line = nil
				bad++
			} else {
				line = append(long, frag...)
			}
			long, tooLong = nil, false
		}
		if line = bytes.TrimSpace(line); len(line) > 0 {
			if rec, ok := parseLine(line); ok {
				fn(rec)
			} else {
				bad++
			}
		}
		if err == io.EOF {
			return bad, nil
		}
	}
}

// parseLine decodes one record; ok is false unless line is a JSON object
// with a non-zero "ts" and no negative cost_micro_usd, input_tokens or
// output_tokens. llmguard writes none below 0; a line that does (a ledger
// edited or forged) would take its figure off every sum that reads it
// (llmguard report, llmguard usage): one cost of -9.2e18 µUSD beside a
// saturated $9.2e12 brought a month's total back to a few micro-dollars.
// Such a line is unreadable, and counted as one by its reader.
func parseLine(line []byte) (Record, bool) {
	if line[0] != '{' {
		return Record{}, false
	}
	var r Record
	if err := json.Unmarshal(line, &r); err != nil || r.TS.IsZero() || r.CostMicroUSD < 0 || r.InputTokens < 0 || r.OutputTokens < 0 {
		return Record{}, false
	}
	return r, true
}

// Files lists the ledger files of path in the order they were written: its
// rotated backups (<name>-<timestamp>.<ext>, or .<ext>.gz when compressed),
// oldest first, then path itself when it exists. When a backup exists both
// plain and gzipped (lumberjack is compressing it), only the plain one is
// listed.
//
// Errors: the directory cannot be read; fs.ErrNotExist (wrapped) when
// neither path nor any backup of it exists.
func Files(path string) ([]string, error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	ext := filepath.Ext(base)
	prefix := strings.TrimSuffix(base, ext) + "-"
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("ledger: list %s: %w", path, err)
	}
	type backup struct {
		t    time.Time
		name string
		gz   bool
	}
	var backups []backup
	plain := map[time.Time]bool{}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasPrefix(name, prefix) {
			continue
		}
		gz := strings.HasSuffix(name, ext+".gz")
		var ts string
		switch {
		case gz:
			ts = strings.TrimSuffix(name, ext+".gz")[len(prefix):]
		case strings.HasSuffix(name, ext):
			ts = strings.TrimSuffix(name, ext)[len(prefix):]
		default:
			continue
		}
		t, err := time.Parse(backupTimeFormat, ts)
		if err != nil {
			continue
		}
		backups = append(backups, backup{t, filepath.Join(dir, name), gz})
		if !gz {
			plain[t] = true
		}
	}
	sort.Slice(backups, func(i, j int) bool { return backups[i].t.Before(backups[j].t) })
	var files []string
	for _, b := range backups {
		if b.gz && plain[b.t] {
			continue
		}
		files = append(files, b.name)
	}
	if _, err := os.Stat(path); err == nil {
		files = append(files, path)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("ledger: stat %s: %w", path, err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("ledger: no ledger file %s nor backups of it: %w", path, fs.ErrNotExist)
	}
	return files, nil
}

// ReadFiles reads every record of the ledger file at path and of its
// rotated backups (see Files), oldest file first, skipping bad lines (see
// ReadLines). Use Files and ReadLines to count the bad lines or to stream
// instead of holding every record.
//
// Errors: as Files; a file that cannot be opened or read, or a corrupt
// gzip stream, with its name.
func ReadFiles(path string) ([]Record, error) {
	files, err := Files(path)
	if err != nil {
		return nil, err
	}
	var recs []Record
	for _, name := range files {
		if _, err := ReadFile(name, func(r Record) { recs = append(recs, r) }); err != nil {
			return nil, err
		}
	}
	return recs, nil
}

// ReadFile reads one ledger file, gunzipping it when its name ends in .gz,
// as ReadLines does. A backup that was plain when listed and has since been
// compressed is read from its .gz.
//
// Errors: the file cannot be opened or read, is not a regular file (a
// FIFO is refused, not waited on), or its gzip stream is corrupt.
func ReadFile(name string, fn func(Record)) (bad int, err error) {
	return ReadFileContext(context.Background(), name, fn)
}

// ReadFileContext is ReadFile that stops reading once ctx is done: it
// looks at ctx before each read of the file (64 KiB of it, or of its
// gunzipped stream, at a time) and returns ctx's error, wrapped, after the
// records fn was given so far. A usage read whose caller has left stops
// so, rather than scan the rest of a ledger of any size for nobody.
//
// Errors: ReadFile's, or ctx's (context.Canceled, DeadlineExceeded).
func ReadFileContext(ctx context.Context, name string, fn func(Record)) (bad int, err error) {
	f, err := openRegular(name)
	if errors.Is(err, fs.ErrNotExist) && !strings.HasSuffix(name, ".gz") {
		if g, gerr := openRegular(name + ".gz"); gerr == nil {
			f, err, name = g, nil, name+".gz"
		}
	}
	if err != nil {
		return 0, fmt.Errorf("ledger: %w", err) // names the file
	}
	defer f.Close()
	var r io.Reader = ctxReader{ctx: ctx, r: f}
	if strings.HasSuffix(name, ".gz") {
		zr, err := gzip.NewReader(r)
		if err != nil {
			return 0, fmt.Errorf("ledger: gunzip %s: %w", name, err)
		}
		defer zr.Close()
		r = ctxReader{ctx: ctx, r: zr} // the gunzipped stream too: a small .gz can inflate to a long read
	}
	bad, err = ReadLines(r, fn)
	if err != nil {
		return bad, fmt.Errorf("ledger: %s: %w", name, err)
	}
	return bad, nil
}

// ctxReader reads r until ctx is done, then returns ctx's error.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
