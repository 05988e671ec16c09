package app

import "testing"

// TestServerReadsNoClockPerRequest: llmguard's server records no request
// time before each request (fasthttp's LazyRequestTime): nothing llmguard
// runs calls RequestCtx.Time, and the read cost about 110 instructions a
// request under callgrind.
func TestServerReadsNoClockPerRequest(t *testing.T) {
	a := mustApp(t, obsConfig(t, "http://127.0.0.1:1", ""))
	if !a.srv.LazyRequestTime {
		t.Fatal("Server.LazyRequestTime is off: fasthttp reads the clock before every request")
	}
}
