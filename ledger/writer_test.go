package ledger_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmguard/llmguard/ledger"
)

// documented is the ledger's schema as issue 6 states it, plus reserved_unit
// and unmetered (issue 12), and the usage ceiling's flag and reported
// figures, and the priced parts of the cost tokens alone do not give
// (1-hour cache writes, audio, web searches: trial3), and the search fees
// (file searches, the per-request fee's size, OpenRouter's web results, the
// fees' part of the cost: bill16), the service tier the cost is priced
// in (tier30), the hosted tools' container gigabyte-sessions (adv35),
// image generation tokens and code execution minutes (adv37), a reported
// cost above the request's cost ceiling (adv51).
var documented = []string{
	"ts", "request_id", "key_id", "user", "tenant", "model", "flavor", "status",
	"input_tokens", "cached_input_tokens", "cache_write_tokens", "cache_write_1h_tokens", "output_tokens",
	"reasoning_tokens", "audio_input_tokens", "audio_output_tokens", "web_searches",
	"file_searches", "search_context_size", "search_results", "search_fee_micro_usd", "container_gb", "image_tokens", "code_execution_minutes", "estimated_input_tokens", "estimated_output_tokens", "reserved", "reserved_unit",
	"cost_micro_usd", "unmetered", "usage_implausible", "reported_input_tokens",
	"reported_output_tokens", "reported_cost_micro_usd", "service_tier",
}

// TestRecordJSONKeys pins the schema: Record's JSON keys are exactly the
// documented ones, so no field can hold a prompt, a completion or a key.
func TestRecordJSONKeys(t *testing.T) {
	typ := reflect.TypeFor[ledger.Record]()
	var tags []string
	for i := range typ.NumField() {
		f := typ.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || tag == "" || tag == "-" {
			t.Errorf("field %s has no JSON key of its own (tag %q)", f.Name, f.Tag.Get("json"))
		}
		tags = append(tags, tag)
	}
	if !slices.Equal(tags, documented) {
		t.Errorf("Record's JSON keys are\n%v\nwant\n%v", tags, documented)
	}
	if !slices.Equal(ledger.Fields(), documented) {
		t.Errorf("Fields() = %v, want %v", ledger.Fields(), documented)
	}

	// And what the Writer puts in the file has exactly those keys, with ts
	// in UTC RFC 3339 whatever the record's location.
	path := filePath(t)
	w := mustNew(t, ledger.Options{File: path})
	r := rec(1)
	r.TS = time.Date(2025, 3, 14, 10, 0, 0, 123000000, time.FixedZone("EST", -5*3600))
	w.Write(r)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("line %q: %v", data, err)
	}
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	want := slices.Sorted(slices.Values(documented))
	if !slices.Equal(keys, want) {
		t.Errorf("line keys = %v, want %v", keys, want)
	}
	if got := m["ts"]; got != "2025-03-14T15:00:00.123Z" {
		t.Errorf("ts = %v, want 2025-03-14T15:00:00.123Z (UTC)", got)
	}
	if _, err := time.Parse(time.RFC3339, m["ts"].(string)); err != nil {
		t.Errorf("ts is not RFC 3339: %v", err)
	}
	if m["cost_micro_usd"] != float64(r.CostMicroUSD) || m["reserved_unit"] != "tokens" || m["status"] != 200.0 {
		t.Errorf("line %s does not hold the record's values", data)
	}
}

// TestConcurrentWritesLandOnce writes from many goroutines and finds every
// record exactly once, with the same total cost.
func TestConcurrentWritesLandOnce(t *testing.T) {
	const goroutines, each = 16, 2000
	path := filePath(t)
	reg := prometheus.NewPedanticRegistry()
	w := mustNew(t, ledger.Options{File: path, Registerer: reg})
	var wg sync.WaitGroup
	var wantCost int64
	for g := range goroutines {
		for i := range each {
			wantCost += rec(g*each + i).CostMicroUSD
		}
		wg.Go(func() {
			for i := range each {
				if !w.Write(rec(g*each + i)) {
					t.Errorf("Write(%d) dropped", g*each+i)
				}
			}
		})
	}
	wg.Wait()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	recs := mustRead(t, path)
	seen := map[string]int{}
	var cost int64
	for _, r := range recs {
		seen[r.RequestID]++
		cost += r.CostMicroUSD
	}
	if len(recs) != goroutines*each || len(seen) != goroutines*each {
		t.Errorf("read %d records, %d distinct, want %d", len(recs), len(seen), goroutines*each)
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("%s written %d times", id, n)
		}
	}
	if cost != wantCost {
		t.Errorf("sum of cost_micro_usd = %d, want %d", cost, wantCost)
	}
	if got := counter(t, reg, "llmguard_ledger_records_total", "file"); got != goroutines*each {
		t.Errorf("records_total{sink=file} = %v, want %d", got, goroutines*each)
	}
	if w.Dropped() != 0 {
		t.Errorf("Dropped = %d", w.Dropped())
	}
}

// TestFullBufferDropsWithoutBlocking holds the sink so that the buffer
// fills: every Write past it returns at once, false, and is counted.
func TestFullBufferDropsWithoutBlocking(t *testing.T) {
	const buffer, excess = 8, 500
	path := filePath(t)
	reg := prometheus.NewPedanticRegistry()
	logger, logs := newLogger()
	release := make(chan struct{})
	var once sync.Once
	o := ledger.WithBeforeBatch(ledger.Options{File: path, Buffer: buffer, Registerer: reg, Logger: logger},
		func() { once.Do(func() { <-release }) })
	w := mustNew(t, o)

	// The sink stays blocked until close(release) below: had Write waited
	// for room, this loop would never end. (No clock: a wall-clock bound
	// fails on a loaded machine.)
	accepted := 0
	for i := range buffer + excess {
		if w.Write(rec(i)) {
			accepted++
		}
	}
	if accepted != buffer || w.Dropped() != excess {
		t.Errorf("accepted %d, Dropped %d; want %d and %d", accepted, w.Dropped(), buffer, excess)
	}
	if got := counter(t, reg, "llmguard_ledger_dropped_total", ""); got != excess {
		t.Errorf("llmguard_ledger_dropped_total = %v, want %d", got, excess)
	}
	// One log line for the burst, not one per drop.
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(logs.String(), "dropped") && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := strings.Count(logs.String(), "dropped_total"); n != 1 {
		t.Errorf("%d drop log lines, want 1:\n%s", n, logs)
	}

	close(release)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	recs := mustRead(t, path)
	if len(recs) != buffer {
		t.Fatalf("file holds %d records, want the %d queued", len(recs), buffer)
	}
	for i, r := range recs {
		if r.RequestID != rec(i).RequestID {
			t.Errorf("record %d is %s, want %s", i, r.RequestID, rec(i).RequestID)
		}
	}
	if w.Write(rec(9999)) || w.Dropped() != excess+1 {
		t.Errorf("Write after Close: Dropped = %d, want %d", w.Dropped(), excess+1)
	}
	if err := w.Flush(context.Background()); !errors.Is(err, ledger.ErrClosed) {
		t.Errorf("Flush after Close = %v, want ErrClosed", err)
	}
}

// TestFlushWritesWhatCameBefore reads the file after Flush, without Close.
func TestFlushWritesWhatCameBefore(t *testing.T) {
	path := filePath(t)
	w := mustNew(t, ledger.Options{File: path})
	for step := 1; step <= 3; step++ {
		for i := range 100 {
			w.Write(rec(step*1000 + i))
		}
		flush(t, w)
		if got := len(mustRead(t, path)); got != step*100 {
			t.Fatalf("step %d: %d records after Flush, want %d", step, got, step*100)
		}
	}
}

// TestWriteSetsZeroTS stamps a record without ts with the current time.
func TestWriteSetsZeroTS(t *testing.T) {
	path := filePath(t)
	w := mustNew(t, ledger.Options{File: path})
	before := time.Now()
	r := rec(1)
	r.TS = time.Time{}
	w.Write(r)
	w.Close()
	recs := mustRead(t, path)
	if len(recs) != 1 || recs[0].TS.Before(before.Add(-time.Millisecond)) || recs[0].TS.After(time.Now()) {
		t.Fatalf("records %+v: want one stamped now", recs)
	}
}

// TestTornLineRepaired: a file left ending mid-line by a crash gets a
// newline before the next record, so only the torn line is lost.
func TestTornLineRepaired(t *testing.T) {
	path := filePath(t)
	line, _ := json.Marshal(rec(1))
	torn := string(line) + "\n" + string(line[:40])
	if err := os.WriteFile(path, []byte(torn), 0o644); err != nil {
		t.Fatal(err)
	}
	w := mustNew(t, ledger.Options{File: path})
	w.Write(rec(2))
	w.Close()
	var ids []string
	bad, err := ledger.ReadFile(path, func(r ledger.Record) { ids = append(ids, r.RequestID) })
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"req-000001", "req-000002"}; !slices.Equal(ids, want) || bad != 1 {
		t.Errorf("read %v with %d bad lines, want %v and 1", ids, bad, want)
	}
}

func TestNewRefusesBadOptions(t *testing.T) {
	for name, o := range map[string]ledger.Options{
		"no sink":         {},
		"redis no stream": {Redis: redisClientStub()},
		"negative buffer": {File: "x.jsonl", Buffer: -1},
		"negative maxlen": {File: "x.jsonl", MaxLen: -1},
	} {
		if w, err := ledger.New(o); err == nil {
			w.Close()
			t.Errorf("%s: New accepted %+v", name, o)
		}
	}
	reg := prometheus.NewPedanticRegistry()
	mustNew(t, ledger.Options{File: filePath(t), Registerer: reg})
	if w, err := ledger.New(ledger.Options{File: filePath(t), Registerer: reg}); err == nil {
		w.Close()
		t.Error("New registered the same metrics twice")
	}
}

// gauge returns the value of the gauge named name (with sink label value
// sink) in reg.
func gauge(t *testing.T, reg *prometheus.Registry, name, sink string) float64 {
	t.Helper()
	return counter(t, reg, name, sink)
}

// counter returns the value of the counter (or gauge) named name (with sink label
// value sink, when not empty) in reg.
func counter(t *testing.T, reg *prometheus.Registry, name, sink string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			match := sink == ""
			for _, l := range m.GetLabel() {
				if l.GetName() == "sink" && l.GetValue() == sink {
					match = true
				}
			}
			if match {
				if g := m.GetGauge(); g != nil {
					return g.GetValue()
				}
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no %s{sink=%q} in the registry", name, sink)
	return 0
}

// Two writers appending to one file wrote over each other's lines (each at
// its own offset: lumberjack creates the file without O_APPEND), and a
// rotation by one moved the file from under the other: two nodes started
// on one config lost and tore records. The second writer is refused while
// the first holds the file, and a writer after it is closed is not.
func TestOneWriterPerFile(t *testing.T) {
	path := filePath(t)
	first, err := ledger.New(ledger.Options{File: path, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	first.Write(ledger.Record{RequestID: "req-1"})
	second, err := ledger.New(ledger.Options{File: path, Registerer: prometheus.NewRegistry()})
	if err == nil {
		second.Close()
		first.Close()
		t.Fatal("a second writer of the same file was accepted")
	}
	if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "its own ledger.file") {
		t.Errorf("error %q does not name the file and what to do", err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	third, err := ledger.New(ledger.Options{File: path, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatalf("after the first writer closed: %v", err)
	}
	third.Write(ledger.Record{RequestID: "req-2"})
	if err := third.Close(); err != nil {
		t.Fatal(err)
	}
	var ids []string
	if _, err := ledger.ReadFile(path, func(r ledger.Record) { ids = append(ids, r.RequestID) }); err != nil {
		t.Fatal(err)
	}
	if want := []string{"req-1", "req-2"}; !slices.Equal(ids, want) {
		t.Errorf("read %v, want %v", ids, want)
	}
	files, err := ledger.Files(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 1 {
		t.Errorf("ledger.Files = %v, want the file alone (not its lock file)", files)
	}
}

// Two names of one file, through a symbolic link, are one ledger: the
// second writer is refused (a link to the file, or to its directory, took
// a lock of its own and wrote into the same file).
func TestOneWriterPerFileThroughLinks(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ledger.jsonl")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	first, err := ledger.New(ledger.Options{File: path, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	fileLink := filepath.Join(dir, "link.jsonl")
	dirLink := filepath.Join(t.TempDir(), "d")
	if err := os.Symlink(path, fileLink); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(dir, dirLink); err != nil {
		t.Fatal(err)
	}
	for _, other := range []string{fileLink, filepath.Join(dirLink, "ledger.jsonl")} {
		w, err := ledger.New(ledger.Options{File: other, Registerer: prometheus.NewRegistry()})
		if err == nil {
			w.Close()
			t.Errorf("a second writer through %s was accepted", other)
		} else if !strings.Contains(err.Error(), "its own ledger.file") {
			t.Errorf("a second writer through %s: %v, want the in-use refusal", other, err)
		}
	}
}

// A lock file removed while the writer runs (a cleanup of "*.lock", the
// directory emptied) is made and locked again at the next flush: a second
// writer started after that is refused. Before, the lock stayed on the
// removed inode, and a second writer made a new lock file, locked it and
// wrote into the same ledger.
func TestRemovedLockIsTakenAgain(t *testing.T) {
	path := filePath(t)
	logger, logs := newLogger()
	first := mustNew(t, ledger.Options{File: path, Logger: logger})
	defer first.Close()
	first.Write(ledger.Record{RequestID: "req-1"})
	flush(t, first)
	if err := os.Remove(path + ".lock"); err != nil {
		t.Fatal(err)
	}
	first.Write(ledger.Record{RequestID: "req-2"})
	flush(t, first)
	second, err := ledger.New(ledger.Options{File: path, Registerer: prometheus.NewRegistry()})
	if err == nil {
		second.Close()
		t.Fatal("a second writer was accepted after the lock file was removed")
	}
	if !strings.Contains(err.Error(), "its own ledger.file") {
		t.Errorf("second writer: %v, want the in-use refusal", err)
	}
	if !strings.Contains(logs.String(), "locked again") {
		t.Errorf("no WARN of the lock taken again: %s", logs)
	}
}
