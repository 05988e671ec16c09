package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/llmguard/llmguard/internal/loadbench"
)

// driveCmd is "llmguard-bench drive -url URL …": the benchmark's load for
// one cell, sent to a proxy started by hand (for instance "llmguard-bench
// child llmguard -upstream URL" under valgrind's callgrind, its standard
// input held open: a child exits when it closes), with
// -between and -after commands run around the measured requests:
//
//	llmguard-bench drive -url http://127.0.0.1:PORT -size 1k -mode warm -concurrency 32 \
//	    -warmup 200 -requests 2000 -between 'callgrind_control -z PID' -after 'callgrind_control -d PID'
//
// It prints one line: requests answered, failed, and the time taken.
// Errors: a flag that does not parse, a command that fails, a failed
// request.
func driveCmd(args []string) error {
	fs := flag.NewFlagSet("llmguard-bench drive", flag.ContinueOnError)
	target := fs.String("url", "", "the proxy's base URL (http://host:port)")
	size := fs.String("size", "1k", "body size (k = KiB)")
	mode := fs.String("mode", "warm", "cold or warm")
	stream := fs.String("stream", "json", "json or sse")
	conc := fs.Int("concurrency", 1, "workers")
	warmup := fs.Int("warmup", 0, "unmeasured requests first (at least two per worker)")
	requests := fs.Int("requests", 1000, "measured requests")
	seed := fs.Uint64("seed", 1, "conversation seed")
	between := fs.String("between", "", "shell command run after the warm-up, before the measured requests")
	after := fs.String("after", "", "shell command run after the measured requests")
	if err := fs.Parse(args); err != nil {
		return err
	}
	mult := 1
	s := *size
	if rest, ok := strings.CutSuffix(strings.ToLower(s), "k"); ok {
		s, mult = rest, 1024
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return fmt.Errorf("-size: %q is not a size", *size)
	}
	warm, err := pair(*mode, "cold", "warm")
	if err != nil || len(warm) != 1 {
		return fmt.Errorf("-mode: want cold or warm")
	}
	sse, err := pair(*stream, "json", "sse")
	if err != nil || len(sse) != 1 {
		return fmt.Errorf("-stream: want json or sse")
	}
	run := func(c string) func() error {
		if c == "" {
			return nil
		}
		return func() error {
			cmd := exec.Command("sh", "-c", c)
			cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
			return cmd.Run()
		}
	}
	cell := loadbench.Cell{Shape: loadbench.Shape{Size: n * mult, Warm: warm[0], Stream: sse[0]}, Concurrency: *conc}
	r, err := loadbench.DriveURL(loadbench.DriveOptions{URL: *target, Cell: cell, Warmup: *warmup, Requests: *requests, Seed: *seed,
		Between: run(*between), After: run(*after)})
	if err != nil {
		return err
	}
	fmt.Printf("%s: %d answered, %d failed, %s\n", cell, r.N, r.Errors, r.Elapsed.Round(time.Millisecond))
	if r.Errors > 0 {
		return fmt.Errorf("%d requests failed, the first: %s", r.Errors, r.FirstError)
	}
	return nil
}
