package app

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/policy"
	"github.com/llmguard/llmguard/proxy"
)

// Reload reads the config file at path and, when it is valid, makes its
// keys, models, prices, limits, unmetered_paths and max_retry_wait serve
// the next request; requests in
// flight finish under the old ones, and buckets keep their usage (they are
// keyed by limit name). An invalid file changes nothing: the error names
// each bad field, and the old config stays in force. Listeners, upstreams,
// the store, max_inflight_response_bytes, region and region_exchange, and
// the proxy's own settings (max_body_bytes, max_inflight_body_bytes,
// max_response_bytes, client_write_timeout), output_reservation, wait_queue, metrics, ledger,
// access_log, tracing and alerts are fixed at start-up: a change to them is
// logged as needing a restart and otherwise ignored (the new limits must
// then be valid with the running region). A limit split between
// regions keeps its held share across a reload that leaves its split alone
// (policy.Policy.AdoptRegional). Every attempt is counted
// (llmguard_config_reloads_total) and the last one's outcome is shown on
// /readyz. key_store changes only at restart too; the stored keys
// themselves change live (README, "Managing keys").
// After ManageMemoryLimit, a reload sets the Go memory limit again from
// the new file (memory_limit_bytes, count_cache_bytes).
func (a *App) Reload(path string) error {
	err := a.reload(path)
	a.reloads.record(a.now(), err)
	return err
}

// reload reads the file at path and applies it (SIGHUP: always, even
// unchanged, as files it names may have changed).
func (a *App) reload(path string) error {
	a.reloadMu.Lock()
	defer a.reloadMu.Unlock()
	b, err := config.ReadFile(path, config.MaxFileBytes)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	return a.apply(path, b)
}

// reloadChanged is Watch's reload of b, the settled content of the file
// at path, counted as Reload's; it applies nothing and counts nothing
// (reloaded false) when the last reload, by SIGHUP or the watch, read the
// same content: a change written then signalled (config management tools
// do both) is one reload, not two.
func (a *App) reloadChanged(path string, b []byte) (reloaded bool, err error) {
	a.reloadMu.Lock()
	if a.loaded != nil && bytes.Equal(a.loaded, b) {
		a.reloadMu.Unlock()
		return false, nil
	}
	err = a.apply(path, b)
	a.reloadMu.Unlock()
	a.reloads.record(a.now(), err)
	return true, err
}

// apply makes b, the content of the config file at path, the running
// config when it is valid (see Reload); a.reloadMu is held.
func (a *App) apply(path string, b []byte) error {
	a.loaded = b
	cfg, err := config.LoadBytes(b, path)
	if err != nil {
		return err
	}
	if a.ListenOverride != "" {
		cfg.Listen = a.ListenOverride
	}
	if a.AdminListenOverride != "" {
		cfg.AdminListen = a.AdminListenOverride
	}
	old := a.cfg.Load()
	var pending []string // the sections the file changes that only a restart applies
	if cfg.Region != old.Region || !reflect.DeepEqual(cfg.RegionExchange, old.RegionExchange) {
		pending = append(pending, "region")
		// The exchange runs for the node's region with the peers it
		// started with: the new limits must work with them.
		a.log.Warn("config reload: region and region_exchange change only at restart; keeping the running ones")
		cfg.Region, cfg.RegionExchange = old.Region, old.RegionExchange
		if err := cfg.Validate(); err != nil {
			return err
		}
	}
	pol, w, err := compile(cfg)
	if err != nil {
		return err
	}
	// admin_token_env applies live: a variable unset or empty would open
	// /admin/* to loopback callers without a token, so the reload is
	// refused, as the start would be.
	if fatal := checkAdminToken(cfg, os.LookupEnv); len(fatal) > 0 {
		return &config.Error{Problems: []string{fatal[0].String()}}
	}
	for _, f := range startOnly {
		if !reflect.DeepEqual(reflect.ValueOf(f.field(old)).Elem().Interface(), reflect.ValueOf(f.field(cfg)).Elem().Interface()) {
			a.log.Warn("config reload: this section changes only at restart; keeping the running one", "field", f.name)
			pending = append(pending, f.name)
		}
	}
	warnRedefined(a.log, a.pol.Load(), pol)
	a.limitsAdded.Store(limitsAdded(a.limitsAdded.Load(), a.pol.Load(), pol, a.now()))
	// Upstreams change only at restart; the limits, keys and prices now.
	logFindings(a.log, slices.Concat(checkDefaultCosts(cfg, pol, w), checkMatchers(cfg, pol), checkShards(cfg), checkLeases(cfg), checkPriceScale(cfg)))
	pol.AdoptRegional(a.pol.Load()) // a region's held share and demand survive a reload that keeps its split
	a.Proxy.Reload(pol, w, proxy.Settings{UnmeteredPaths: cfg.UnmeteredPaths, MaxRetryWait: time.Duration(cfg.MaxRetryWait)})
	a.pol.Store(pol)
	a.cfg.Store(running(cfg, old))
	if a.memManaged.Load() {
		a.applyMemoryLimit(a.cfg.Load(), false)
	}
	if a.stores.leases != nil {
		// A limit may have changed: leases go back, and are taken again
		// under the new one.
		if err := a.stores.leases.ReturnAll(); err != nil {
			a.log.Warn("config reload: returning leases failed; the units come back as the buckets refill", "err", err)
		}
	}
	a.reloads.setRestartPending(pending)
	a.log.Info("config reloaded", "path", path, "limits", len(cfg.Limits), "keys", len(cfg.Keys))
	return nil
}

// startOnly are the config sections a reload does not change: each a
// YAML name and the address of its field in a Config. Listeners,
// upstreams and stores are built once; the others are read only where the
// proxy, its listener and their helpers are built (newApp), and a reload
// that changed them used to log "config reloaded" and keep the old values
// without a word. (unmetered_paths and max_retry_wait apply live:
// proxy.Settings; region and region_exchange are kept before compiling,
// in reload.)
var startOnly = []struct {
	name  string
	field func(*config.Config) any // a pointer to the section
}{
	{"listen", func(c *config.Config) any { return &c.Listen }},
	{"admin_listen", func(c *config.Config) any { return &c.AdminListen }},
	{"upstreams", func(c *config.Config) any { return &c.Upstreams }},
	{"store", func(c *config.Config) any { return &c.Store }},
	{"key_store", func(c *config.Config) any { return &c.KeyStore }},
	{"tls", func(c *config.Config) any { return &c.TLS }},
	{"admin_tls", func(c *config.Config) any { return &c.AdminTLS }},
	{"max_inflight_response_bytes", func(c *config.Config) any { return &c.MaxInflightResponseBytes }},
	{"max_connections", func(c *config.Config) any { return &c.MaxConnections }},
	{"max_body_bytes", func(c *config.Config) any { return &c.MaxBodyBytes }},
	{"max_inflight_body_bytes", func(c *config.Config) any { return &c.MaxInflightBodyBytes }},
	{"max_response_bytes", func(c *config.Config) any { return &c.MaxResponseBytes }},
	{"client_write_timeout", func(c *config.Config) any { return &c.ClientWriteTimeout }},
	{"output_reservation", func(c *config.Config) any { return &c.OutputReservation }},
	{"wait_queue", func(c *config.Config) any { return &c.WaitQueue }},
	{"metrics", func(c *config.Config) any { return &c.Metrics }},
	{"ledger", func(c *config.Config) any { return &c.Ledger }},
	{"access_log", func(c *config.Config) any { return &c.AccessLog }},
	{"tracing", func(c *config.Config) any { return &c.Tracing }},
	{"alerts", func(c *config.Config) any { return &c.Alerts }},
}

// running returns a copy of cfg with old's values in the startOnly
// sections: the config the node runs after a reload of cfg, against which
// the next reload is compared (a section still changed in the file is
// warned of again; one changed back is not).
func running(cfg, old *config.Config) *config.Config {
	c := *cfg
	for _, f := range startOnly {
		reflect.ValueOf(f.field(&c)).Elem().Set(reflect.ValueOf(f.field(old)).Elem())
	}
	return &c
}

// watchSettle is how long Watch waits after a change before it reads
// the file, and how long the content must then hold still to be reloaded.
const watchSettle = 100 * time.Millisecond

// Watch reloads the config file at path whenever it changes (written,
// replaced by rename as editors and config-management tools do,
// re-created, or swapped behind a symlink as Kubernetes ConfigMaps are),
// until stop is called. Changes within 100 ms are taken as one, and a
// change that leaves the file's content as it was reloads nothing. A file
// is reloaded only once its content has held still for 100 ms (two reads
// that far apart agree): a file written in several steps (a generator's
// buffered output, a slow copy) is not loaded from a prefix, which may be
// valid with limits missing (cut after `limits:`, or between two limits):
// it was in force, those limits off, until the rest came. A writer that
// pauses longer than that can still be caught mid-way. A failed reload is
// logged with every bad field, and the old config stays in force.
func (a *App) Watch(path string) (stop func(), err error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		w.Close()
		return nil, err
	}
	// Watch the directory: a file replaced by rename loses a watch on
	// itself.
	if err := w.Add(filepath.Dir(abs)); err != nil {
		w.Close()
		return nil, err
	}
	last, _ := config.ReadFile(abs, config.MaxFileBytes)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var debounce <-chan time.Time
		var settling []byte // the file as read when the timer last fired, reloaded if the next read agrees
		after := a.watchAfter
		if after == nil {
			after = time.After
		}
		for {
			select {
			case <-done:
				return
			case ev, ok := <-w.Events:
				if !ok {
					return
				}
				// Any change in the directory may be the file: it may be a
				// symlink whose target was swapped (Kubernetes ConfigMaps
				// replace a "..data" link). The content decides below.
				// The timer is not pushed back by later events: a busy
				// directory (a ledger file beside the config) must not
				// postpone the reload forever.
				if ev.Op&(fsnotify.Write|fsnotify.Create|fsnotify.Rename|fsnotify.Remove) != 0 && debounce == nil {
					debounce = after(watchSettle)
				}
			case err, ok := <-w.Errors:
				if !ok {
					return
				}
				a.log.Error("config watch", "err", err)
			case <-debounce:
				debounce = nil
				b, err := config.ReadFile(abs, config.MaxFileBytes)
				if err != nil || bytes.Equal(b, last) {
					settling = nil
					continue // gone for a moment, or unchanged
				}
				if !bytes.Equal(b, settling) {
					settling, debounce = b, after(watchSettle) // still being written, maybe: read it again
					continue
				}
				settling, last = nil, b
				reloaded, err := a.reloadChanged(abs, b)
				switch {
				case err != nil:
					a.logReloadError(abs, err)
				case !reloaded:
					a.log.Info("config file changed to what the last reload (SIGHUP) read; not reloaded again", "path", abs)
				}
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(done)
			w.Close()
			wg.Wait()
		})
	}, nil
}

func (a *App) logReloadError(path string, err error) {
	var ce *config.Error
	if errors.As(err, &ce) {
		for _, p := range ce.Problems {
			a.log.Error("config reload refused; the running config stays in force", "path", path, "problem", p)
		}
		return
	}
	a.log.Error("config reload refused; the running config stays in force", "path", path, "err", err)
}

// warnRedefined logs every limit that keeps its name but changes what its
// stored amounts mean: its unit, or a quota's period or time zone. Its
// buckets are keyed by name, so usage so far is read under the new
// definition: a quota whose period grows (day to month) carries its usage
// into the longer period; one whose period now starts later (a time zone
// moved west, a month shortened to a day) begins afresh; a changed unit
// reinterprets the stored number. Rename the limit to start a clean bucket.
// It also logs a limit whose shards changed: its buckets then have new keys.
func warnRedefined(log *slog.Logger, old, next *policy.Policy) {
	prev := map[string]*policy.Rule{}
	for i := range old.Rules() {
		prev[old.Rules()[i].Name] = &old.Rules()[i]
	}
	for i := range next.Rules() {
		r := &next.Rules()[i]
		o, ok := prev[r.Name]
		if !ok {
			continue
		}
		if o.Unit != r.Unit || o.Period != r.Period || o.IsQuota() != r.IsQuota() ||
			(r.IsQuota() && o.Location.String() != r.Location.String()) {
			log.Warn("config reload: limit redefined under the same name; its stored usage is read under the new definition (a longer period carries it over, a later-starting period begins afresh, a new unit reinterprets it); rename the limit to start a new bucket instead",
				"limit", r.Name, "old_unit", o.Unit.String(), "new_unit", r.Unit.String(),
				"old_period", o.Period.String(), "new_period", r.Period.String())
		}
		if o.Shards != r.Shards {
			log.Warn("config reload: limit's shards changed; its buckets move to new keys, which start full while the old ones expire unused, so up to one more capacity (quota) may be admitted once",
				"limit", r.Name, "old_shards", o.Shards, "new_shards", r.Shards)
		}
	}
}

// limitsAdded is App.limitsAdded after a reload at now from old to next:
// prev's entries for the quota limits next keeps (same name and shards),
// now for those old did not have or whose shards changed (their buckets
// start afresh), none for the rest.
func limitsAdded(prev *map[string]time.Time, old, next *policy.Policy, now time.Time) *map[string]time.Time {
	kept := map[string]*policy.Rule{}
	for i := range old.Rules() {
		kept[old.Rules()[i].Name] = &old.Rules()[i]
	}
	out := map[string]time.Time{}
	for i := range next.Rules() {
		r := &next.Rules()[i]
		if !r.IsQuota() {
			continue
		}
		if o, ok := kept[r.Name]; !ok || o.Shards != r.Shards {
			out[r.Name] = now
		} else if prev != nil {
			if at, ok := (*prev)[r.Name]; ok {
				out[r.Name] = at
			}
		}
	}
	return &out
}

// reloadStatus counts config reloads and remembers the last failure, for
// /readyz ("config") and the metrics llmguard_config_reloads_total{result}
// and llmguard_config_last_reload_successful (1 or 0, as Prometheus's own
// prometheus_config_last_reload_successful).
type reloadStatus struct {
	mu       sync.Mutex
	ok, fail int64
	lastAt   time.Time // the last reload attempted; zero before any
	lastErr  string    // its error, "" when it succeeded
	// restartPending are the sections the last applied reload's file
	// changes that the node keeps as it started with (startOnly, region):
	// until a restart it serves another config than its file.
	restartPending []string

	total   *prometheus.CounterVec
	success prometheus.Gauge
}

func (r *reloadStatus) init(reg prometheus.Registerer) {
	r.total = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "llmguard_config_reloads_total",
		Help: "Config reloads (file change or SIGHUP) by result: ok, or failed (the running config stayed in force).",
	}, []string{"result"})
	r.success = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "llmguard_config_last_reload_successful",
		Help: "1 when the last config reload succeeded (or none was tried), 0 when it was refused and the running config is older than the file.",
	})
	r.success.Set(1)
	r.total.WithLabelValues("ok")
	r.total.WithLabelValues("failed")
	reg.MustRegister(r.total, r.success)
}

func (r *reloadStatus) record(at time.Time, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lastAt = at
	if err != nil {
		r.fail++
		r.lastErr = reloadErrorText(err)
		r.total.WithLabelValues("failed").Inc()
		r.success.Set(0)
		return
	}
	r.ok++
	r.lastErr = ""
	r.total.WithLabelValues("ok").Inc()
	r.success.Set(1)
}

// setRestartPending records the sections (YAML names) that the file
// just applied changes and that only a restart applies; nil when none.
func (r *reloadStatus) setRestartPending(names []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.restartPending = names
}

// pendingRestart is setRestartPending's last list (not to be modified).
func (r *reloadStatus) pendingRestart() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.restartPending
}

// maxReloadErrorBytes bounds the error /readyz repeats: a config with
// thousands of bad fields must not make every probe answer megabytes.
const maxReloadErrorBytes = 4 << 10

func reloadErrorText(err error) string {
	msg := err.Error()
	var ce *config.Error
	if errors.As(err, &ce) {
		msg = strings.Join(ce.Problems, "; ")
	}
	if len(msg) > maxReloadErrorBytes {
		msg = msg[:maxReloadErrorBytes] + "…"
	}
	return msg
}

// snapshot is /readyz's "config" object: reloads that took and were
// refused, the last one's time and error, and the sections the file
// changes that wait for a restart (restart_pending, present only then). A
// refused reload leaves the node ready: it serves on the config it had.
func (r *reloadStatus) snapshot() map[string]any {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := map[string]any{"reloads": r.ok, "reload_failures": r.fail, "last_reload_successful": r.lastErr == ""}
	if !r.lastAt.IsZero() {
		m["last_reload_at"] = r.lastAt.UTC().Format(time.RFC3339)
	}
	if r.lastErr != "" {
		m["last_reload_error"] = r.lastErr
	}
	if len(r.restartPending) > 0 {
		m["restart_pending"] = r.restartPending
	}
	return m
}
