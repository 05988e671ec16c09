package loadbench

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/internal/app"
	"github.com/llmguard/llmguard/internal/mockllm"
)

// Each process the benchmark measures is this program run again with
// "child ROLE [flags]" (see [Child]). A child binds 127.0.0.1:0, writes
// "listening URL" (and, for llmguard, "admin URL") on its standard output,
// then answers each "cpu" line on its standard input with "cpu N", N its
// own CPU time so far (user + system) in microseconds, from getrusage. It
// exits when its standard input closes (and, on Linux, when its parent
// dies: Pdeathsig).

// Roles a child plays.
const (
	RoleMock     = "mock"     // the mock upstream (internal/mockllm)
	RoleBare     = "bare"     // the bare fasthttp reverse proxy (the floor)
	RoleLLMGuard = "llmguard" // llmguard itself (internal/app)
)

// benchKey is the virtual key every request carries.
const benchKey = "sk-bench-alice"

// llmguardConfig is the configuration the llmguard child runs: one OpenAI
// upstream, one key, and the three rules of internal/app's BenchmarkLoad —
// user tokens, tenant USD, global requests — set far above the load, so
// that every request is weighed, taken from three buckets and reconciled,
// and none is refused. %s: the upstream's URL, then the store section.
const llmguardConfig = `
listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
upstreams: [{name: mock, flavor: openai, base_url: "%s", no_key: true}]
keys: [{key: ` + benchKey + `, user: alice, tenant: acme}]
limits:
  - {name: user-tpm, scope: user, unit: tokens, rate: 1000000000, per: 1s}
  - {name: tenant-usd, scope: tenant, unit: usd, rate: 1000000, per: 1s}
  - {name: global-rps, scope: global, unit: requests, rate: 1000000, per: 1s}
%s
`

// Child runs the role args[0] with its flags args[1:] until its standard
// input closes: mock [-tokenize], bare -upstream URL, llmguard -upstream URL
// [-redis host:port | -redis-cluster host:port,…] [-store-timeout D]; each
// takes -cpuprofile FILE. Errors: an unknown role or flag, a server that does
// not start or stops.
func Child(args []string) error {
	if len(args) == 0 {
		return errors.New("loadbench: child: no role")
	}
	fs := flag.NewFlagSet("child "+args[0], flag.ContinueOnError)
	upstream := fs.String("upstream", "", "upstream base URL (bare, llmguard)")
	redisAddr := fs.String("redis", "", "Redis host:port: llmguard's store (memory when empty)")
	configFile := fs.String("config", "", "llmguard: run this YAML config instead of the built-in one (-upstream and -redis are then unused; its listeners are replaced by free loopback ports)")
	clusterAddrs := fs.String("redis-cluster", "", "Redis Cluster seed nodes, host:port,…: llmguard's store (redis_cluster)")
	storeTimeout := fs.Duration("store-timeout", 0, "llmguard's store.timeout (0: its default)")
	tokenize := fs.Bool("tokenize", false, "mock: count chat input with the weigher (default: len(body)/4)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole life of the process to this file")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if args[0] == RoleLLMGuard || args[0] == RoleBare {
		// Both proxies run with the timer slack llmguard serve runs with
		// (app.EnsureTimerSlack: this child executes itself again once),
		// so that the floor differs from llmguard by llmguard's work alone.
		slack, err := app.TimerSlack(os.LookupEnv)
		if err != nil {
			return err
		}
		if _, err := app.EnsureTimerSlack(slack); err != nil {
			fmt.Fprintln(os.Stderr, "llmguard-bench child:", err)
		}
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer func() { pprof.StopCPUProfile(); f.Close() }()
	}
	served := make(chan error, 2)
	var lines []string
	var err error
	switch args[0] {
	case RoleMock:
		s, err := mockllm.StartWith("127.0.0.1:0", mockllm.Options{ByteCountedChat: !*tokenize})
		if err != nil {
			return err
		}
		defer s.Close()
		lines = append(lines, "listening "+s.URL)
	case RoleBare:
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		go func() { served <- serveBare(ln, *upstream) }()
		lines = append(lines, "listening http://"+ln.Addr().String())
	case RoleLLMGuard:
		text := childConfig(*upstream, *redisAddr, *clusterAddrs, *storeTimeout)
		if *configFile != "" {
			if text, err = os.ReadFile(*configFile); err != nil {
				return err
			}
		}
		cfg, err := config.Parse(text)
		if err != nil {
			return err
		}
		a, err := app.New(cfg, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
		if err != nil {
			return err
		}
		defer a.Close()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		adm, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		go func() { served <- a.Serve(ln, adm) }()
		lines = append(lines, "listening http://"+ln.Addr().String(), "admin http://"+adm.Addr().String())
	default:
		return fmt.Errorf("loadbench: child: unknown role %q", args[0])
	}
	for _, l := range lines {
		fmt.Println(l)
	}
	go func() { served <- answerCPU(os.Stdin, os.Stdout) }()
	return <-served
}

// answerCPU answers each "cpu" line of in with "cpu N" on out, N this
// process's CPU time in microseconds; it returns nil when in ends.
func answerCPU(in io.Reader, out io.Writer) error {
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) != "cpu" {
			continue
		}
		us, err := selfCPU()
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintln(out, "cpu", strconv.FormatInt(us, 10)); err != nil {
			return err
		}
	}
	return nil
}

// childConfig is the config an llmguard child runs when given no -config:
// the three rules of llmguardConfig forwarding to upstream, on the memory
// store, or on the Redis at redisAddr or the cluster of clusterAddrs
// (comma-separated host:port) with store.timeout storeTimeout (0: the
// default). On Redis the idle health probe is off (health_check: 0s): a
// child waiting between runs would otherwise send a probe take every 5 s,
// counted in whatever run or floor another child is measuring on the same
// servers (CI saw one in a 12-call FCALL floor).
func childConfig(upstream, redisAddr, clusterAddrs string, storeTimeout time.Duration) []byte {
	remote := ", health_check: 0s"
	if storeTimeout > 0 {
		remote += ", timeout: " + storeTimeout.String()
	}
	store := "store: {backend: memory}"
	switch {
	case redisAddr != "":
		store = "store: {backend: redis, redis_url: \"redis://" + redisAddr + "/0\"" + remote + "}"
	case clusterAddrs != "":
		store = "store: {backend: redis_cluster, cluster_addrs: [" + clusterAddrs + "]" + remote + "}"
	}
	return fmt.Appendf(nil, llmguardConfig, upstream, store)
}
