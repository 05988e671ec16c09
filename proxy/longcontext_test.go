package proxy

import (
	"testing"

	"github.com/valyala/fasthttp"
)

// readFields reads every anthropic-beta field, in any case, and never
// allocates.
func TestLongContextHeader(t *testing.T) {
	var h fasthttp.RequestHeader
	h.DisableNormalizing()
	h.Set("Content-Type", "application/json")
	h.Add("anthropic-beta", "files-api-2025-04-14")
	if readFields(&h).long {
		t.Errorf("files-api alone read as the 1M-context beta")
	}
	h.Add("ANTHROPIC-BETA", "Context-1M-2025-08-07")
	if !readFields(&h).long {
		t.Errorf("a second, capitalised anthropic-beta field naming context-1m missed")
	}
	if n := testing.AllocsPerRun(100, func() { readFields(&h) }); n != 0 {
		t.Errorf("readFields allocates %v times a call", n)
	}
}
