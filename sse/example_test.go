package sse_test

import (
	"bytes"
	"fmt"
	"os"

	"github.com/llmguard/llmguard/sse"
)

// The proxy forwards every event's raw bytes except a usage-only chunk it
// requested itself, reading usage from it first. Bytes left at end of
// stream are forwarded unchanged.
func Example() {
	upstream := [][]byte{
		[]byte("data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\r\n\r"),
		[]byte("\n: keep-alive\r\n\r\ndata: {\"choices\":[],\"usage\":{\"total_tokens\":7}}\r\n\r\ndata: [DO"),
		[]byte("NE]\r\n\r\n"),
	}
	var s sse.Scanner
	var client bytes.Buffer
	for _, chunk := range upstream {
		s.Feed(chunk, func(raw []byte, ev sse.Event) {
			if ev.HasData && bytes.Contains(ev.Data, []byte(`"usage"`)) {
				fmt.Printf("usage event: %s\n", ev.Data)
				return // drop it
			}
			client.Write(raw)
		})
	}
	client.Write(s.Buffered())
	os.Stdout.Write(bytes.ReplaceAll(client.Bytes(), []byte("\r\n"), []byte("|\n")))
	// Output:
	// usage event: {"choices":[],"usage":{"total_tokens":7}}
	// data: {"choices":[{"delta":{"content":"Hi"}}]}|
	// |
	// : keep-alive|
	// |
	// data: [DONE]|
	// |
}
