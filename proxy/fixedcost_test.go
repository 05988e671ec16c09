package proxy

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/valyala/fasthttp"

	"github.com/llmguard/llmguard/obs"
)

// TestRequestIDs: each request's id is bucket.NewRequestID's form (24
// lowercase hex digits: the Unix second, then 16 random ones), written in
// its exchange, different from the next one's, and unchanged when later
// exchanges are made.
func TestRequestIDs(t *testing.T) {
	seen, digits := map[string]bool{}, map[byte]bool{}
	var first string
	for i := range 100 {
		before := uint32(time.Now().Unix())
		x := &exchange{}
		x.setID()
		after := uint32(time.Now().Unix())
		if len(x.id) != 24 {
			t.Fatalf("id %q: %d characters, want 24", x.id, len(x.id))
		}
		sec, err := strconv.ParseUint(x.id[:8], 16, 32)
		if err != nil || uint32(sec) < before || uint32(sec) > after {
			t.Fatalf("id %q: does not start with the second it was made in (%x..%x)", x.id, before, after)
		}
		for _, c := range []byte(x.id[8:]) {
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
				t.Fatalf("id %q: not lowercase hex", x.id)
			}
			digits[c] = true
		}
		if seen[x.id] {
			t.Fatalf("id %q given twice", x.id)
		}
		seen[x.id] = true
		if i == 0 {
			first = x.id
		}
	}
	if !seen[first] || len(seen) != 100 {
		t.Errorf("the first id changed: %q", first)
	}
	if len(digits) != 16 { // 1,600 random digits: each of the 16 appears
		t.Errorf("only %d distinct hex digits in 100 ids", len(digits))
	}
}

// pathAllocBudget is the allocations a ~1 KiB chat request answered with
// JSON makes through the proxy path (BenchmarkProxyPath/llmguard), the
// bare forward's (transport) being 10: the upstream round trip's four
// (fasthttp's stream body and its closures) and the exchange, which holds
// the meter's (meter.Meter.AdmitInto): 5 measured. The body's buffer is
// the body pool's (internal/bufpool keeps buffers from MinBytes, 512
// bytes; 6 allocations when it kept only those of 4 KiB and more). The
// credential is read in place from the header (identify), the bucket
// keys are remembered (meter's keyMemo) and the model name interned.
const pathAllocBudget = 5

// TestPathAllocationBudget: a request through the proxy path allocates no
// more than pathAllocBudget times (measured without the race detector,
// which allocates on its own account), whether the upstream gets the
// gateway's own key (made once, not per request) or none.
func TestPathAllocationBudget(t *testing.T) {
	if raceEnabled || testing.Short() {
		t.Skip("allocation measurement")
	}
	for _, c := range []struct {
		name string
		with func(*Options)
	}{
		{name: "no upstream key", with: func(*Options) {}},
		// As long as OpenAI's project keys (over 32 bytes: a string built
		// from it per request would not fit the stack's buffer).
		{name: "upstream key", with: func(o *Options) { o.Upstreams[0].APIKey = "sk-proj-" + strings.Repeat("x", 156) }},
	} {
		px := newPathRig(t, cannedJSON, c.with)
		r := newPathRequest(pathBody)
		for range 20 { // warm the pools, the caches and the keep-alive connection
			if st := r.serve(t, px.Handle); st != 200 {
				t.Fatalf("%s: status %d: %s", c.name, st, r.ctx.Response.Body())
			}
		}
		// The least of three runs: the memory store's table of recent
		// request ids grows as ids accumulate (bucket.recentIDs), which a
		// run of 100 requests now and then meets.
		least := math.MaxFloat64
		for range 3 {
			least = min(least, testing.AllocsPerRun(100, func() { r.serve(t, px.Handle) }))
		}
		if least > pathAllocBudget {
			t.Errorf("%s: %v allocations a request, budget %d", c.name, least, pathAllocBudget)
		}
	}
}

// streamAllocBudget is the allocations the same request streamed makes
// through the proxy path (BenchmarkProxyPathStream/llmguard: 23 events,
// the usage chunk llmguard asked for stripped), the bare forward's being
// 10: 43 measured (44 before the body pool kept 1 KiB bodies' buffers:
// internal/bufpool.MinBytes), 50 before one goroutine watched every stream's client
// (clientWatch: a stream's own goroutine, channel and ticker gone), 52
// before the stream's source and its writer's arguments were kept in its
// exchange (streamSource, streamRelay) instead of an allocation and two
// closures of their own.
const streamAllocBudget = 43

// TestStreamAllocationBudget: a streamed request through the proxy path
// allocates no more than streamAllocBudget times, counted over every
// goroutine (fasthttp's stream reader's and the stream worker's included),
// the least of three runs.
func TestStreamAllocationBudget(t *testing.T) {
	if raceEnabled || testing.Short() {
		t.Skip("allocation measurement")
	}
	px := newPathRig(t, cannedSSE)
	r := newPathRequest(pathStreamBody)
	for range 20 {
		if st := r.serve(t, px.Handle); st != 200 {
			t.Fatalf("status %d: %s", st, r.ctx.Response.Body())
		}
	}
	least := math.MaxFloat64
	for range 3 {
		least = min(least, testing.AllocsPerRun(100, func() { r.serve(t, px.Handle) }))
	}
	if least > streamAllocBudget {
		t.Errorf("%v allocations a streamed request, budget %d", least, streamAllocBudget)
	}
	if testing.Verbose() {
		t.Logf("%v allocations a streamed request", least)
	}
}

// exchangeBytes is the most an exchange may take: with the 8-byte header
// the allocator puts before an object of over 512 bytes that holds
// pointers, 3,456 bytes, the size class a request allocates it in; the
// next class is 4,096, 640 bytes more to clear and collect on every
// request. It was 3,200 until trial27's quota-gauge fix gave each of the
// meter's inline rules a 24-byte gaugeMark (an exchange 3,176 → 3,272
// bytes, 256 more cleared a request): the finance gauge's correctness over
// the class; taking the marks out of meter.Applied would win it back.
const exchangeBytes = 3448

// TestExchangeSize: an exchange fits exchangeBytes.
func TestExchangeSize(t *testing.T) {
	if n := unsafe.Sizeof(exchange{}); n > exchangeBytes {
		t.Errorf("an exchange takes %d bytes, more than %d", n, exchangeBytes)
	}
}

// TestRefusedBeforeBodyOverhead: a request refused before its body is
// read (an unknown key) has no start of its own; its access-log overhead
// counts from its arrival (the observation's start), so it lies within
// the time the handler took, measured around it.
func TestRefusedBeforeBodyOverhead(t *testing.T) {
	out := &syncWriter{b: &strings.Builder{}}
	log, err := obs.NewAccessLog(obs.AccessLogOptions{Writer: out, SampleAllowed: 1})
	if err != nil {
		t.Fatal(err)
	}
	px := newPathRig(t, cannedJSON, func(o *Options) { o.AccessLog = log })
	r := newPathRequest(pathBody)
	r.ctx.Request.Header.Set("Authorization", "Bearer sk-unknown")
	before := time.Now()
	if st := r.serve(t, px.Handle); st != fasthttp.StatusUnauthorized {
		t.Fatalf("status %d, want 401", st)
	}
	took := time.Since(before)
	var line map[string]any
	if err := json.Unmarshal([]byte(strings.TrimSpace(out.string())), &line); err != nil {
		t.Fatalf("%v: %q", err, out.string())
	}
	us, ok := line["overhead_us"].(float64)
	if !ok || us < 0 || us > float64(took.Microseconds()+1) {
		t.Errorf("overhead_us %v, the handler took %v", line["overhead_us"], took)
	}
}
