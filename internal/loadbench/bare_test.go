package loadbench

import (
	"slices"
	"testing"

	"github.com/valyala/fasthttp"
)

// TestDropHopFields: the bare proxy drops every hop-by-hop field whatever
// its case, both ways, and keeps the others.
func TestDropHopFields(t *testing.T) {
	fields := [][2]string{
		{"Keep-Alive", "timeout=5"}, {"te", "trailers"}, {"X-Keep", "1"}, {"PROXY-AUTHORIZATION", "Basic x"},
		{"upgrade", "websocket"}, {"Content-Type", "application/json"}, {"Proxy-Connection", "keep-alive"},
		{"Trailer", "X-Sum"}, {"Tee", "kept: same first letters, another length"}, {"Connection", "close"},
	}
	want := []string{"Content-Type", "Tee", "X-Keep"}
	keys := func(ks [][]byte) []string {
		var out []string
		for _, k := range ks {
			out = append(out, string(k))
		}
		slices.Sort(out)
		return out
	}
	var req fasthttp.RequestHeader
	req.DisableNormalizing()
	var resp fasthttp.ResponseHeader
	resp.DisableNormalizing()
	for _, f := range fields {
		req.Set(f[0], f[1])
		resp.Set(f[0], f[1])
	}
	dropHopFields(&req)
	dropHopFields(&resp)
	if got := keys(req.PeekKeys()); !slices.Equal(got, want) {
		t.Errorf("request fields left: %q, want %q", got, want)
	}
	if got := keys(resp.PeekKeys()); !slices.Equal(got, want) {
		t.Errorf("answer fields left: %q, want %q", got, want)
	}
	if req.ConnectionClose() || resp.ConnectionClose() {
		t.Error("Connection: close is still set")
	}
}
