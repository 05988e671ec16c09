package app

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"

	"github.com/llmguard/llmguard/config"
)

// memoryMargin is the derived memory limit's room, in bytes, for what no
// budget bounds: connections' read and write buffers (16 KiB and 4 KiB
// each while in use), goroutine stacks, the ledger's and metrics' buffers,
// and fragmentation.
const memoryMargin = 64 << 20

// keptBodyBuffers is what the proxy keeps of request-body buffers for
// reuse, in bytes, under a body budget of bodyBudget bytes: 32 MiB, or an
// eighth of the budget if less (README, "Resources").
func keptBodyBuffers(bodyBudget int64) int64 { return min(32<<20, bodyBudget/8) }

// MemoryLimit is the Go runtime's soft memory limit, in bytes, that cfg
// asks for, with base the bytes of Go memory in use at start (goMemory:
// vocabularies, the count table, code's data); -1 means no limit.
// memory_limit_bytes when set (-1: none); else, derived, what the budgets
// allow to be live at once plus base and memoryMargin:
//
//	max_inflight_body_bytes × 5/4 (a body's buffer may be a quarter larger)
//	+ the body buffers kept for reuse (min(32 MiB, the body budget / 8))
//	+ max_inflight_response_bytes (answers held whole, decoded copies
//	  included, and unfinished stream events)
//	+ count_cache_bytes (0 when -1)
//	+ base + 64 MiB
//
// At the defaults (256 MiB, 256 MiB, 32 MiB) and a base of about 90 MiB
// it is about 794 MiB. Under it the collector keeps the process's Go
// memory near the limit when the budgets fill, where without it it lets
// the heap grow to twice what is live (GOGC=100).
func MemoryLimit(cfg *config.Config, base int64) int64 {
	switch {
	case cfg.MemoryLimitBytes < 0:
		return -1
	case cfg.MemoryLimitBytes > 0:
		return cfg.MemoryLimitBytes
	}
	return cfg.MaxInflightBodyBytes/4*5 + keptBodyBuffers(cfg.MaxInflightBodyBytes) +
		cfg.MaxInflightResponseBytes + max(cfg.CountCacheBytes, 0) + base + memoryMargin
}

// goMemory is the Go runtime's memory in use, in bytes: what the soft
// memory limit counts (runtime/metrics' /memory/classes/total:bytes less
// the heap released to the operating system).
func goMemory() int64 {
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64() - s[1].Value.Uint64())
}

// ManageMemoryLimit sets the Go runtime's soft memory limit
// (runtime/debug.SetMemoryLimit) to MemoryLimit(config, the Go memory in
// use now, after a collection) and logs it, and does so again at every
// successful Reload. When lookupEnv (os.LookupEnv) finds GOMEMLIMIT set,
// that limit stands: it only logs it, and reloads leave it alone. Call it
// once, after New, from the process that serves (llmguard serve): the
// limit is the whole process's, which tests that build many Apps in one
// process leave as it is. The limit in force is exported as
// go_gc_gomemlimit_bytes (math.MaxInt64: none).
func (a *App) ManageMemoryLimit(lookupEnv func(string) (string, bool)) {
	if v, ok := lookupEnv("GOMEMLIMIT"); ok && v != "" {
		a.log.Info("memory limit from GOMEMLIMIT; memory_limit_bytes is not applied", "GOMEMLIMIT", v,
			"limit_bytes", debug.SetMemoryLimit(-1))
		return
	}
	runtime.GC()
	a.memBase.Store(goMemory())
	a.memManaged.Store(true)
	a.applyMemoryLimit(a.cfg.Load(), true)
}

// applyMemoryLimit sets the limit cfg asks for; it logs it at start, and
// at a reload when it changed.
func (a *App) applyMemoryLimit(cfg *config.Config, start bool) {
	base := a.memBase.Load()
	limit := MemoryLimit(cfg, base)
	source := "derived"
	if cfg.MemoryLimitBytes != 0 {
		source = "memory_limit_bytes"
	}
	set := limit
	if limit < 0 {
		set = math.MaxInt64
	}
	if prev := debug.SetMemoryLimit(set); !start && prev == set {
		return
	}
	if limit < 0 {
		a.log.Info("no memory limit (memory_limit_bytes: -1): the collector lets the heap grow to twice what is live")
		return
	}
	a.log.Info("memory limit set", "limit_mib", limit>>20, "source", source, "base_mib", base>>20,
		"max_inflight_body_bytes", cfg.MaxInflightBodyBytes, "max_inflight_response_bytes", cfg.MaxInflightResponseBytes,
		"count_cache_bytes", cfg.CountCacheBytes)
	if least := MinUsefulMemoryLimit(base); cfg.MemoryLimitBytes > 0 && limit < least {
		a.log.Warn("memory_limit_bytes is below the Go memory in use at start plus 64 MiB: the collector will run "+
			"almost continuously, spending CPU on every allocation; raise memory_limit_bytes to at least least_bytes, "+
			"or set it to 0 to derive the limit from the budgets",
			"memory_limit_bytes", cfg.MemoryLimitBytes, "base_mib", base>>20, "least_bytes", least)
	}
}

// MinUsefulMemoryLimit is the least memory_limit_bytes, in bytes, under
// which llmguard serve logs a warning at start and at reload, with base
// the Go memory in use at start in bytes (measured at run time, about
// 90 MiB at the default config): base + 64 MiB, the derived limit's margin
// with every budget empty. Below it the live heap alone nears the limit
// and the collector runs almost continuously; llmguard still applies the
// value (config.MinMemoryLimitBytes, 32 MiB, is the hard floor).
func MinUsefulMemoryLimit(base int64) int64 { return base + memoryMargin }
