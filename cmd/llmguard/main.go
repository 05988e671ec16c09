// Command llmguard is the rate-limiting reverse proxy for LLM APIs.
//
//	llmguard serve [--config FILE]     run the proxy (embedded default without --config)
//	               [--log-level LEVEL] debug, info (default), warn or error
//	llmguard validate [--config FILE]  check a config (the embedded default without --config);
//	                                   non-zero exit names each bad field
//	                                   (--strict: warnings too; --no-env: skip api_key_env's variables;
//	                                   --connect: dial each Redis and upstream it names)
//	llmguard usage [--config FILE]     spend, tokens and quotas from a running llmguard
//	                                   (the embedded default's admin listener without --config)
//	llmguard version                   the version, commit and Go release it was built from
//	llmguard help [COMMAND]            what --help prints, for llmguard or a command
//
// Exit status: 0 on success; 1 when the command failed (an invalid config,
// a listener that cannot bind, a running llmguard that cannot be asked);
// 2 on a usage error (an unknown command or flag, a missing or invalid
// argument), as the shells' and most tools' convention has it.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/alecthomas/kong"
	"github.com/redis/go-redis/v9"

	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/internal/app"
	"github.com/llmguard/llmguard/lua"
)

type cli struct {
	Serve    serveCmd    `cmd:"" help:"Run the proxy."`
	Validate validateCmd `cmd:"" help:"Validate a config file (the embedded default without --config) and exit."`
	Usage    usageCmd    `cmd:"" help:"Show spend, tokens and quotas from a running llmguard (its /admin/usage endpoint)."`
	Version  versionCmd  `cmd:"" help:"Print the version, commit and Go release this binary was built from."`
	Report   reportCmd   `cmd:"" help:"Write one tenant's monthly spend report (self-contained HTML) from the ledger to stdout (CSV or JSON: usage --format csv|json)."`
	Keys     keysCmd     `cmd:"" help:"Manage the virtual keys of the key store (create, list, show, revoke, rotate, audit), or hash a key for the config file."`
	Help     helpCmd     `cmd:"" help:"Show the help of llmguard, or of a command (llmguard help keys create), as --help does."`
}

// helpCmd is `llmguard help [command…]`: what --help prints for llmguard or
// for the command named. (A newcomer's `llmguard help` was refused as an
// unexpected argument, exit 2: trial2.)
type helpCmd struct {
	Command []string `arg:"" optional:"" help:"The command, e.g. serve or keys create."`
}

// Run prints the usage of the command h names (of llmguard without one) to
// standard output. Errors: an unknown command (a usageError, exit 2).
func (h *helpCmd) Run(k *kong.Context) error {
	ctx, err := kong.Trace(k.Kong, h.Command)
	if err == nil {
		err = ctx.Error
	}
	if err != nil {
		return usageError{fmt.Errorf("help: %w", err)}
	}
	return ctx.PrintUsage(false)
}

type serveCmd struct {
	Config      string `help:"YAML config file. Default: the embedded default (in-memory store, mock upstream on 127.0.0.1:8081)." type:"path"`
	LogFormat   string `help:"Log format: text or json." enum:"text,json" default:"text"`
	LogLevel    string `help:"Least severe log level written: debug, info, warn or error." enum:"debug,info,warn,error" default:"info"`
	Listen      string `help:"Override the config's listen address (host:port)."`
	AdminListen string `help:"Override the config's admin_listen address (host:port)."`
}

// Help is serve's detailed help (kong.HelpProvider): the environment it
// reads and the signals it handles, which its flags do not show (trial2:
// LLMGUARD_TIMER_SLACK was in the README only).
func (s *serveCmd) Help() string {
	return "Environment: each upstream's api_key_env and the config's admin_token_env name the variables holding " +
		"the secrets; LLMGUARD_TIMER_SLACK sets the timer slack (default 1ms; a Go duration up to 1s, or off; Linux); " +
		"GOMEMLIMIT overrides the memory limit llmguard sets. " +
		"Signals: SIGHUP reloads --config (the file is also watched); SIGTERM or SIGINT stops accepting, lets the " +
		"requests in flight end (/readyz answers 503 meanwhile) and exits; a second one exits at once."
}

type validateCmd struct {
	Config string `help:"YAML config file. Default: the embedded default, which serve runs without --config (the output names it)." type:"path"`
	Strict bool   `help:"Exit non-zero on warnings too (e.g. a limit below a model's default request cost, a matcher that matches nothing, a key plan no limit names; README, \"Configuration reference\")."`
	NoEnv  bool   `help:"Do not check the environment: that each upstream's api_key_env and the admin_token_env are set here (validating on a machine without the secrets)." name:"no-env"`
	// Connect dials what the config names once it validates (app.Probe).
	Connect bool `help:"Also dial every server the config names: each Redis (store, ledger stream, region peers) must answer, be Redis 6.2 or later and in the backend's mode; each upstream must take a TCP connection and, for https, a verified TLS handshake. No request is sent upstream and no key is touched."`
	// Timeout bounds each server's probe under --connect.
	Timeout time.Duration `help:"Under --connect, how long each server may take to answer." default:"5s"`
}

// exitUsage is the exit status of a command line that does not parse.
const exitUsage = 2

func main() {
	var c cli
	parser, err := kong.New(&c, kong.Name("llmguard"), kong.Description("A cost-weighted rate-limiting reverse proxy for LLM APIs."), kong.UsageOnError())
	if err != nil { // the cli struct's tags are wrong: a programming error
		panic(err)
	}
	k, err := parser.Parse(os.Args[1:])
	if err != nil {
		// An unknown command or flag, a missing or invalid argument: the
		// short usage, the error, and exit 2.
		var pe *kong.ParseError
		if errors.As(err, &pe) {
			pe.Context.PrintUsage(true)
			fmt.Fprintln(os.Stderr)
		}
		fmt.Fprintln(os.Stderr, "llmguard:", err)
		os.Exit(exitUsage)
	}
	if err := k.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "llmguard:", err)
		var ue usageError
		if errors.As(err, &ue) {
			os.Exit(exitUsage)
		}
		os.Exit(1)
	}
}

// usageError is a flag's value that parses but that the command refuses
// (a month 13, a negative budget, an unknown time zone): it exits 2, as
// kong's own parse errors do.
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

func loadConfig(path string) (*config.Config, error) {
	if path == "" {
		return config.Default()
	}
	return config.Load(path)
}

// printConfigError writes one problem per line, so each names its field.
// Any other error (a config file that cannot be read, a ledger file another
// node holds, a TLS pair that does not load) is one line prefixed
// "llmguard:", as main prints every other failure: it was printed bare
// ("app: ledger: … is written by another process", trial19).
func printConfigError(w io.Writer, path string, err error) {
	var ce *config.Error
	if errors.As(err, &ce) {
		fmt.Fprintf(w, "%s: invalid configuration:\n", path)
		for _, p := range ce.Problems {
			fmt.Fprintf(w, "  - %s\n", p)
		}
		return
	}
	fmt.Fprintln(w, "llmguard:", err)
}

// Run checks the file as `serve` would: it parses and validates, its
// limits compile, and nothing in it cannot work (app.Check): an error
// exits 1 naming each field; warnings are printed, and exit 1 with
// --strict. Without --config it checks what `serve` runs without one, the
// embedded default, and every line it prints names it so.
func (v *validateCmd) Run() error {
	cfg, err := loadConfig(v.Config)
	name := configName(v.Config)
	var findings []app.Finding
	if err == nil {
		env := app.Lookup(os.LookupEnv)
		if v.NoEnv {
			env = nil
		}
		findings, err = app.CheckConfig(cfg, env)
	}
	if err == nil {
		if fatal := app.Fatal(findings); len(fatal) > 0 {
			ce := &config.Error{}
			for _, f := range fatal {
				ce.Problems = append(ce.Problems, f.String())
			}
			err = ce
		}
	}
	if err != nil {
		printConfigError(os.Stderr, name, err)
		os.Exit(1)
	}
	warned := 0
	for _, f := range findings {
		if !f.Fatal {
			fmt.Fprintf(os.Stderr, "%s: warning: %s\n", name, f)
			warned++
		}
	}
	if v.Connect && !v.probe(cfg, name, &warned) {
		os.Exit(1)
	}
	if warned > 0 && v.Strict {
		fmt.Fprintf(os.Stderr, "%s: %s (--strict)\n", name, warnings(warned))
		os.Exit(1)
	}
	if warned > 0 {
		// "OK" alone under a screen of warnings read as "nothing to see".
		fmt.Printf("%s: OK, with %s (above; serve runs it, --strict fails it)\n", name, warnings(warned))
		return nil
	}
	fmt.Printf("%s: OK\n", name)
	return nil
}

// probe runs app.Probe on cfg and prints a line a server: to standard
// output when it answered as serve needs, to standard error when not
// ("unreachable: …") or with a warning. It reports whether every server
// answered, and adds the warnings to *warned.
func (v *validateCmd) probe(cfg *config.Config, name string, warned *int) bool {
	// go-redis logs each failed dial to stderr; the probe's own line says
	// it once (as report does: trial8).
	redis.SetLogger(redisLogger{slog.New(slog.NewTextHandler(os.Stderr, nil))})
	ok := true
	for _, r := range app.Probe(context.Background(), cfg, v.Timeout) {
		where := r.Target
		if r.Addr != "" { // "" when the address could not be worked out
			where += " (" + r.Addr + ")"
		}
		switch {
		case r.Err != nil:
			fmt.Fprintf(os.Stderr, "%s: %s: unreachable or unfit: %v\n", name, where, r.Err)
			ok = false
		case r.Warning != "":
			fmt.Fprintf(os.Stderr, "%s: warning: %s: %s\n", name, where, r.Warning)
			*warned++
		default:
			fmt.Printf("%s: %s: %s\n", name, where, r.Detail)
		}
	}
	return ok
}

// defaultConfigName names the embedded default config in what serve and
// validate print when they run it (no --config).
const defaultConfigName = "embedded default config"

// configName is how serve's and validate's messages name the config at
// path: the path, or defaultConfigName for "".
func configName(path string) string {
	if path == "" {
		return defaultConfigName
	}
	return path
}

func (s *serveCmd) Run() error {
	// The timer slack first: it may execute this program again.
	slack, err := app.TimerSlack(os.LookupEnv)
	if err != nil {
		return usageError{err}
	}
	inForce, err := app.EnsureTimerSlack(slack)
	if err != nil {
		fmt.Fprintln(os.Stderr, "llmguard:", err, "(serving with the inherited timer slack)")
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(s.LogLevel)); err != nil { // kong's enum admits only valid names
		return err
	}
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler = slog.NewTextHandler(os.Stderr, opts)
	if s.LogFormat == "json" {
		h = slog.NewJSONHandler(os.Stderr, opts)
	}
	log := slog.New(h)
	slog.SetDefault(log)
	// go-redis logs through a package-level logger: send it to slog, at
	// debug level (every failure it reports is already counted and logged
	// by the store guard).
	redis.SetLogger(redisLogger{log})
	cfg, err := loadConfig(s.Config)
	if err != nil {
		printConfigError(os.Stderr, configName(s.Config), err)
		os.Exit(1)
	}
	if s.Listen != "" {
		cfg.Listen = s.Listen
	}
	if s.AdminListen != "" {
		cfg.AdminListen = s.AdminListen
	}
	source := s.Config
	if source == "" {
		source = "embedded default"
	}
	startAttrs := []any{"version", buildVersion().Version, "config", source,
		"upstreams", upstreamsForLog(cfg), "store", storeForLog(cfg.Store), "log_level", level.String(),
		"timer_slack", timerSlackForLog(slack, inForce)}
	if cfg.Store.RedisURL != "" || len(cfg.Store.ClusterAddrs) > 0 {
		// The Functions library this build loads: the one to keep when an
		// operator deletes old ones after an upgrade.
		startAttrs = append(startAttrs, "redis_library", lua.LibraryName)
	}
	log.Info("llmguard starting", startAttrs...)
	a, err := app.New(cfg, log)
	if err != nil {
		printConfigError(os.Stderr, source, err)
		os.Exit(1)
	}
	a.ListenOverride, a.AdminListenOverride = s.Listen, s.AdminListen // a reload keeps them
	a.Registry.MustRegister(buildInfoGauge(buildVersion()))
	// The soft memory limit from the budgets (memory_limit_bytes), unless
	// GOMEMLIMIT is set.
	a.ManageMemoryLimit(os.LookupEnv)
	// Signals are caught before the listeners open: a SIGTERM after
	// "llmguard listening" was logged but before signal.Notify (the config
	// watch is set up in between, slow on a loaded machine) killed the
	// process by the default action, with no drain (TestSecondSignalEndsTheDrain,
	// CI at load 4+ with two hogs).
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	done := make(chan error, 1)
	go func() { done <- a.ListenAndServe() }()
	if s.Config != "" {
		// Live changes: the file is watched, and SIGHUP reloads it too.
		stop, err := a.Watch(s.Config)
		if err != nil {
			log.Warn("cannot watch the config file; SIGHUP still reloads it", "err", err)
		} else {
			defer stop()
		}
	}
	for {
		select {
		case err := <-done:
			return err
		case got := <-sig:
			if got == syscall.SIGHUP {
				if s.Config == "" {
					log.Warn("SIGHUP: the embedded default config cannot be reloaded")
				} else if err := a.Reload(s.Config); err != nil {
					printConfigError(os.Stderr, s.Config+" (reload refused; the running config stays in force)", err)
				}
				continue
			}
			// Draining: streams in flight run to their end (README,
			// "Graceful shutdown"); /readyz answers 503 meanwhile.
			log.Info("shutting down", "signal", got.String())
			return drain(log, a, sig)
		}
	}
}

// exitCutShort is serve's exit status when a second signal ends the drain:
// requests still in flight were cut, their reconciliation lost.
const exitCutShort = 1

// drain closes a (App.Close: the requests in flight run to their end) and
// logs "shut down" with how long it took once it has, so that a log read
// after the fact tells a clean exit from a kill. A second SIGINT or SIGTERM
// on sig meanwhile (Ctrl-C pressed again) exits at once, status
// exitCutShort, cutting off what still streams: a drain waits for streams
// up to an upstream's timeout (10 minutes by default), and every signal
// after the first was ignored (trial2). SIGHUP is ignored while draining.
func drain(log *slog.Logger, a *app.App, sig <-chan os.Signal) error {
	began := time.Now()
	closed := make(chan error, 1)
	go func() { closed <- a.Close() }()
	for {
		select {
		case err := <-closed:
			if err != nil {
				log.Warn("shut down", "took", time.Since(began).Round(time.Millisecond), "err", err)
			} else {
				log.Info("shut down", "took", time.Since(began).Round(time.Millisecond))
			}
			return err
		case got := <-sig:
			if got == syscall.SIGHUP {
				log.Warn("SIGHUP while shutting down: not reloaded")
				continue
			}
			log.Warn("second signal while shutting down: exiting now, cutting off the requests still in flight (their reconciliation is lost)",
				"signal", got.String(), "after", time.Since(began).Round(time.Millisecond))
			os.Exit(exitCutShort)
		}
	}
}

// timerSlackForLog names the timer slack serve runs with, given the one
// asked for (LLMGUARD_TIMER_SLACK's, 0 for off) and the one in force
// (EnsureTimerSlack's; 0: unknown): "1ms" when they agree; the one in force
// marked "(inherited)" when the process kept its own — off, a larger slack
// from its parent (systemd's TimerSlackNSec=), or a failure to set it —
// where the log said the slack asked for (trial2); "inherited" alone when
// none can be read.
func timerSlackForLog(asked, inForce time.Duration) string {
	switch {
	case inForce <= 0:
		return "inherited"
	case inForce == asked:
		return inForce.String()
	}
	return inForce.String() + " (inherited)"
}

// redisLogger adapts slog to go-redis's logger.
type redisLogger struct{ log *slog.Logger }

func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	l.log.DebugContext(ctx, fmt.Sprintf(format, v...), "source", "go-redis")
}

// warnings is "1 warning" or "n warnings".
func warnings(n int) string {
	if n == 1 {
		return "1 warning"
	}
	return strconv.Itoa(n) + " warnings"
}
