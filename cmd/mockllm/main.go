// Command mockllm runs a small upstream for the quickstart, load benchmarks
// and manual tests, speaking OpenAI's API (chat completions, responses,
// completions, embeddings, models), Anthropic's (messages, count_tokens) and
// Azure OpenAI's paths, JSON and SSE, with usage; see package
// internal/mockllm for the x-mock-* request headers that steer it.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/llmguard/llmguard/internal/mockllm"
)

func main() {
	addr := flag.String("listen", "127.0.0.1:8081", "address to listen on (host:port)")
	flag.Parse()
	s, err := mockllm.Start(*addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("mockllm listening on %s\n", s.URL)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	s.Close()
}
