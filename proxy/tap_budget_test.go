package proxy

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// TestStreamEventsWithinTheBudget: through real sockets, an SSE event a
// stream has not finished is held past tapEventFree bytes only with room
// in max_inflight_response_bytes. Before, each stream could hold up to
// sse.DefaultMaxEventBytes (16 MiB) of an unfinished event, and as much
// again of its parsed data, outside any budget: 20 streams sending one
// endless data: line held 360 MB of heap (from 29 MB). Without room, the
// event is relayed unread (the client still gets every byte) and the
// stream keeps its reservation; with room, a 2 MiB event carrying the
// usage is read and charged exactly.
func TestStreamEventsWithinTheBudget(t *testing.T) {
	w := testWeigher(t)
	reserved := w.Chat([]byte(budgetBody)).InputTokens + 50
	body := strings.Replace(budgetBody, `"max_tokens":50`, `"max_tokens":50,"stream":true,"stream_options":{"include_usage":true}`, 1)
	endless := "data: " + strings.Repeat("x", 8<<20) // never finished
	big := `data: {"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":1},"pad":"` + strings.Repeat("x", 2<<20) + "\"}\n\ndata: [DONE]\n\n"
	for _, tc := range []struct {
		name   string
		stream string
		budget int64
		read   bool // the usage is read, else the reservation stands
	}{
		{name: "8 MiB unfinished, 1 MiB budget", stream: endless, budget: 1 << 20},
		{name: "2 MiB usage event, room", stream: big, budget: 64 << 20, read: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sent := []byte("HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: " + itoa(len(tc.stream)) + "\r\n\r\n" + tc.stream)
			url := byteUpstream(t, func(c net.Conn, _ int) bool {
				for s := sent; len(s) > 0; s = s[min(len(s), 64<<10):] { // in reads of at most 64 KiB
					if _, err := c.Write(s[:min(len(s), 64<<10)]); err != nil {
						return false
					}
				}
				return true
			})
			r := newRig(t, rigOptions{url: url, w: w, answerBudget: tc.budget})
			before := r.remaining()
			var got int64
			alloc := allocated(func() {
				req, _ := http.NewRequest(http.MethodPost, r.url+"/v1/chat/completions", strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer sk-panic")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				if got, err = io.Copy(io.Discard, resp.Body); err != nil || resp.StatusCode != 200 {
					t.Fatalf("status %d, %v", resp.StatusCode, err)
				}
			})
			if got != int64(len(tc.stream)) {
				t.Errorf("client got %d bytes, want the %d sent", got, len(tc.stream))
			}
			if most := tc.budget + 12<<20; !tc.read && int64(alloc) > most { // unbounded: 43 MiB
				t.Errorf("the request allocated %d MiB with a budget of %d MiB: the event's buffers are not bounded", alloc>>20, tc.budget>>20)
			}
			r.waitLedger(1)
			charged := before - r.remaining()
			switch {
			case tc.read && charged != 2:
				t.Errorf("charged %d, want the 2 tokens reported", charged)
			case !tc.read && charged < reserved:
				t.Errorf("charged %d, want at least the reservation %d", charged, reserved)
			}
			r.released(tc.name)
		})
	}
}
