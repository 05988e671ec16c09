// Command llmguard-bench is the load benchmark anyone can rerun:
//
//	go run ./cmd/llmguard-bench            # the full matrix, ~6 minutes on 2 cores
//	go run ./cmd/llmguard-bench -quick     # every cell, briefly (~1 minute)
//	go run ./cmd/llmguard-bench hot        # one hot tenant and one hot global limit on a 3-master Redis Cluster,
//	                                       # plain, sharded, leased (see loadbench.RunHot)
//
// It starts, each as a process of its own on 127.0.0.1, the mock upstream,
// a bare fasthttp reverse proxy (the floor), llmguard on the in-memory
// store and llmguard on Redis (with a redis-server it starts; leave the
// redis target out when Redis is not installed), sends each the same
// bounded load — realistic chat bodies of about 1, 16 and 128 KiB, cold and
// warm, JSON and streamed, at concurrency 1 and 32 — and prints one
// markdown table: requests/s, latency quantiles, latency added against the
// mock itself, CPU per request of each proxy process from its own
// accounting, and the ratios to the bare proxy. See package
// internal/loadbench.
//
// With -redis-work it measures instead the Redis work per admitted request
// (commands, scripts, round trips, Redis µs from INFO commandstats and the
// redis-server process's CPU) of llmguard on one redis-server and on a
// Redis Cluster of three masters, at concurrency 1 and 32; -compare runs
// another build's llmguard alternately against the same Redis (an A/B):
//
//	go run ./cmd/llmguard-bench -redis-work
//	go build -o /tmp/bench-b ./cmd/llmguard-bench   # at the other commit
//	go run ./cmd/llmguard-bench -redis-work -compare /tmp/bench-b
//	go run ./cmd/llmguard-bench -redis-work -callgrind -requests 1000   # instructions, under valgrind
//
// "llmguard-bench drive -url URL …" sends one cell's load to a proxy started
// by hand ("llmguard-bench child bare|llmguard -upstream URL", under
// valgrind's callgrind, strace or perf), with commands run around the
// measured requests (see drive.go): whole-process instructions per request.
//
// "llmguard-bench child ROLE …" is how it runs its processes (hidden).
package main

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/llmguard/llmguard/internal/loadbench"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "child" {
		if err := loadbench.Child(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "llmguard-bench child:", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "drive" {
		if err := driveCmd(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "llmguard-bench drive:", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "hot" {
		o, err := parseHotFlags(os.Args[2:])
		if err != nil {
			fmt.Fprintln(os.Stderr, "llmguard-bench hot:", err)
			os.Exit(2)
		}
		rep, err := loadbench.RunHot(o)
		if err != nil {
			fmt.Fprintln(os.Stderr, "llmguard-bench hot:", err)
			os.Exit(1)
		}
		rep.Markdown(os.Stdout)
		return
	}
	if slices.Contains(os.Args[1:], "-redis-work") || slices.Contains(os.Args[1:], "--redis-work") {
		o, err := parseRedisWorkFlags(os.Args[1:])
		if err != nil {
			fmt.Fprintln(os.Stderr, "llmguard-bench:", err)
			os.Exit(2)
		}
		rep, err := loadbench.RunRedisWork(o)
		if err != nil {
			fmt.Fprintln(os.Stderr, "llmguard-bench:", err)
			os.Exit(1)
		}
		rep.Markdown(os.Stdout)
		return
	}
	o, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "llmguard-bench:", err)
		os.Exit(2)
	}
	rep, err := loadbench.Run(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "llmguard-bench:", err)
		os.Exit(1)
	}
	rep.Markdown(os.Stdout)
}

// parseFlags reads the command line into loadbench.Options. Errors: a flag
// or list item that does not parse.
func parseFlags(args []string) (loadbench.Options, error) {
	fs := flag.NewFlagSet("llmguard-bench", flag.ContinueOnError)
	sizes := fs.String("sizes", "1k,16k,128k", "body sizes, comma-separated (k = KiB)")
	conc := fs.String("concurrency", "1,32", "worker counts, comma-separated")
	stream := fs.String("stream", "both", "json, sse or both")
	mode := fs.String("mode", "both", "cold, warm or both")
	targets := fs.String("targets", strings.Join(loadbench.AllTargets, ","), "targets, comma-separated: direct, bare, memory, redis")
	requests := fs.Int("requests", 5000, "at most this many requests per run (one cell, one target)")
	duration := fs.Duration("duration", 3*time.Second, "at most this long per run")
	quick := fs.Bool("quick", false, "short runs (300 requests or 0.4 s) over the whole selection")
	tokenize := fs.Bool("tokenize-mock", false, "the mock counts input tokens with the weigher, as the API would (default: len/4, cheap)")
	quiet := fs.Bool("q", false, "no progress lines on stderr")
	profile := fs.String("cpuprofile-dir", "", "write each proxy process's CPU profile here (bare.pprof, memory.pprof, redis.pprof)")
	compare := fs.String("compare", "", "another llmguard-bench executable whose llmguard (memory store) runs as the target memory-b, next to memory in each cell (A/B)")
	rounds := fs.Int("rounds", 1, "run the selection this many times in one report; with -compare, memory and memory-b alternate which goes first")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "Usage: llmguard-bench [flags]    the load benchmark (README \"Performance\")\n"+
			"       llmguard-bench -redis-work [flags]    Redis work per admitted request (see llmguard-bench -redis-work -h)\n"+
			"       llmguard-bench hot [flags]    one hot tenant on a cluster (see llmguard-bench hot -h)\n"+
			"       llmguard-bench drive [flags]    one cell's load against a proxy started by hand (see llmguard-bench drive -h)\n"+
			"Flags of the load benchmark:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return loadbench.Options{}, err
	}
	o := loadbench.Options{Requests: *requests, Duration: *duration, TokenizeMock: *tokenize, Targets: splitList(*targets), ProfileDir: *profile,
		Compare: *compare, Rounds: *rounds}
	if *quick {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if !set["requests"] {
			o.Requests = 300
		}
		if !set["duration"] {
			o.Duration = 400 * time.Millisecond
		}
	}
	if !*quiet {
		o.Progress = os.Stderr
	}
	for _, s := range splitList(*sizes) {
		mult := 1
		if rest, ok := strings.CutSuffix(strings.ToLower(s), "k"); ok {
			s, mult = rest, 1024
		}
		n, err := strconv.Atoi(s)
		if err != nil {
			return o, fmt.Errorf("-sizes: %q is not a size", s)
		}
		o.Sizes = append(o.Sizes, n*mult)
	}
	for _, s := range splitList(*conc) {
		n, err := strconv.Atoi(s)
		if err != nil {
			return o, fmt.Errorf("-concurrency: %q is not a number", s)
		}
		o.Concurrency = append(o.Concurrency, n)
	}
	var err error
	if o.Streams, err = pair(*stream, "json", "sse"); err != nil {
		return o, fmt.Errorf("-stream: %w", err)
	}
	if o.Warm, err = pair(*mode, "cold", "warm"); err != nil {
		return o, fmt.Errorf("-mode: %w", err)
	}
	return o, nil
}

// parseHotFlags reads the command line of "llmguard-bench hot" into
// loadbench.HotOptions. Errors: a flag that does not parse.
func parseHotFlags(args []string) (loadbench.HotOptions, error) {
	fs := flag.NewFlagSet("llmguard-bench hot", flag.ContinueOnError)
	variants := fs.String("variants", strings.Join(loadbench.HotVariants, ","), "variants, comma-separated: "+strings.Join(loadbench.HotVariants, ", "))
	masters := fs.Int("masters", 3, "Redis Cluster masters")
	conc := fs.Int("concurrency", 64, "workers, all with the one key of the one tenant")
	requests := fs.Int("requests", 20000, "at most this many requests per variant")
	duration := fs.Duration("duration", 5*time.Second, "at most this long per variant")
	quiet := fs.Bool("q", false, "no progress lines on stderr")
	if err := fs.Parse(args); err != nil {
		return loadbench.HotOptions{}, err
	}
	if fs.NArg() > 0 {
		return loadbench.HotOptions{}, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	o := loadbench.HotOptions{Variants: splitList(*variants), Masters: *masters, Concurrency: *conc, Requests: *requests, Duration: *duration}
	if !*quiet {
		o.Progress = os.Stderr
	}
	return o, nil
}

// parseRedisWorkFlags reads the command line of -redis-work into
// loadbench.RedisWorkOptions. Errors: a flag or list item that does not
// parse.
func parseRedisWorkFlags(args []string) (loadbench.RedisWorkOptions, error) {
	fs := flag.NewFlagSet("llmguard-bench -redis-work", flag.ContinueOnError)
	fs.Bool("redis-work", true, "measure the Redis work per admitted request")
	stores := fs.String("stores", strings.Join(loadbench.AllStores, ","), "stores, comma-separated: redis (one server), cluster (three masters)")
	conc := fs.String("concurrency", "1,32", "worker counts, comma-separated")
	requests := fs.Int("requests", 4000, "at most this many requests per run")
	duration := fs.Duration("duration", 5*time.Second, "at most this long per run")
	rounds := fs.Int("rounds", 3, "runs of each store, concurrency and build, the builds alternating")
	compare := fs.String("compare", "", "another llmguard-bench executable whose llmguard is run as build B (A/B)")
	callgrind := fs.Bool("callgrind", false, "run Redis under valgrind's callgrind and report its instructions per request (load-independent; some 50x slower: use fewer requests)")
	pace := fs.Bool("pace-floors", false, "send the floors (PING, FCALL, FCALL+6) at the rate build A's requests were admitted in the same round, not back to back")
	quiet := fs.Bool("q", false, "no progress lines on stderr")
	if err := fs.Parse(args); err != nil {
		return loadbench.RedisWorkOptions{}, err
	}
	o := loadbench.RedisWorkOptions{Stores: splitList(*stores), Requests: *requests, Duration: *duration, Rounds: *rounds, Compare: *compare, Callgrind: *callgrind, PaceFloors: *pace}
	if !*quiet {
		o.Progress = os.Stderr
	}
	for _, s := range splitList(*conc) {
		n, err := strconv.Atoi(s)
		if err != nil {
			return o, fmt.Errorf("-concurrency: %q is not a number", s)
		}
		o.Concurrency = append(o.Concurrency, n)
	}
	return o, nil
}

// pair reads "off", "on" or "both" under the names given: false, true, or both.
func pair(v, off, on string) ([]bool, error) {
	switch v {
	case off:
		return []bool{false}, nil
	case on:
		return []bool{true}, nil
	case "both":
		return []bool{false, true}, nil
	}
	return nil, fmt.Errorf("%q: want %s, %s or both", v, off, on)
}

func splitList(s string) []string {
	var out []string
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
