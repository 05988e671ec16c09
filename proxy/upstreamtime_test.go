package proxy

import (
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/llmguard/llmguard/obs"
)

// slowHeadConn is a cannedConn whose answer's first byte comes only after
// a hold: held is the span of that hold, measured around it.
type slowHeadConn struct {
	*cannedConn
	hold time.Duration
	held time.Duration
}

func (c *slowHeadConn) Read(p []byte) (int, error) {
	if c.off == 0 {
		t0 := time.Now()
		time.Sleep(c.hold)
		c.held += time.Since(t0)
	}
	return c.cannedConn.Read(p)
}

// TestUpstreamTimeCounted: the time an upstream takes before its answer
// comes is the request's upstream time, not llmguard's overhead: its
// access-log line's upstream_us is at least the hold the upstream made
// (measured around the hold, in the same run), and overhead_us plus
// upstream_us stay within duration_us (readings of one monotonic clock).
func TestUpstreamTimeCounted(t *testing.T) {
	out := &syncWriter{b: &strings.Builder{}}
	log, err := obs.NewAccessLog(obs.AccessLogOptions{Writer: out, SampleAllowed: 1})
	if err != nil {
		t.Fatal(err)
	}
	px := newPathRig(t, cannedJSON, func(o *Options) { o.AccessLog = log })
	conn := &slowHeadConn{cannedConn: newCannedConn(cannedJSON), hold: 20 * time.Millisecond}
	px.opt.Upstreams[0].client.DialTimeout = func(string, time.Duration) (net.Conn, error) { return conn, nil }
	r := newPathRequest(pathBody)
	if st := r.serve(t, px.Handle); st != fasthttp.StatusOK {
		t.Fatalf("status %d, want 200", st)
	}
	var line map[string]any
	if err := json.Unmarshal([]byte(strings.TrimSpace(out.string())), &line); err != nil {
		t.Fatalf("%v: %q", err, out.string())
	}
	up, _ := line["upstream_us"].(float64)
	over, _ := line["overhead_us"].(float64)
	dur, _ := line["duration_us"].(float64)
	if held := float64(conn.held.Microseconds()); up < held {
		t.Errorf("upstream_us %v, less than the upstream's hold of %v µs", up, held)
	}
	if over < 0 || over+up > dur+1 { // +1: each is rounded to a µs
		t.Errorf("overhead_us %v + upstream_us %v exceeds duration_us %v", over, up, dur)
	}
}
