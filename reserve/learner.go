package reserve

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// Options configures a Learner. The zero value of each field is the
// documented default.
type Options struct {
	// Quantile is the share of recent outputs a learned reservation
	// covers, in (0, 1). 0: 0.95.
	Quantile float64
	// MinSamples is how many settled outputs a model needs before its
	// reservation is learned; until then the fixed default stands. 0: 50.
	MinSamples int64
	// Floor is the smallest learned reservation per completion, in tokens.
	// 0: 256.
	Floor int64
	// Cap is the largest learned reservation per completion, in tokens (a
	// request's own MaxOutput, the model's documented maximum, lowers it
	// further). 0: 32768.
	Cap int64
	// HalfLife is after how many later outputs of the same model an output
	// weighs half as much. 0: 500.
	HalfLife int
	// MaxModels bounds the number of per-model sketches (about 3 KiB each);
	// past it, models share one. 0: 1024.
	MaxModels int
}

// Defaults of Options.
const (
	DefaultQuantile   = 0.95
	DefaultMinSamples = 50
	DefaultFloor      = 256
	DefaultCap        = 32768
	DefaultHalfLife   = 500
	DefaultMaxModels  = 1024
)

// Shared is the sketch key of every model without a sketch of its own:
// unpriced names (chosen by callers) and names past MaxModels.
const Shared = "other"

// Learner keeps one Sketch per model and answers learned output
// reservations. Safe for concurrent use: Reservation reads an atomic value
// per model, Observe takes the model's lock.
type Learner struct {
	opt    Options
	mu     sync.RWMutex
	models map[string]*model
}

// model is one model's sketch and its current learned quantile.
type model struct {
	mu      sync.Mutex
	sketch  *Sketch
	learned atomic.Int64 // the quantile in tokens, 0 until MinSamples
	samples atomic.Int64
}

// New checks o and builds a Learner. Errors: Quantile outside (0, 1), a
// negative count, Floor above Cap.
func New(o Options) (*Learner, error) {
	if o.Quantile == 0 {
		o.Quantile = DefaultQuantile
	}
	if !(o.Quantile > 0 && o.Quantile < 1) {
		return nil, fmt.Errorf("reserve: quantile %v is outside (0, 1)", o.Quantile)
	}
	if o.MinSamples < 0 || o.Floor < 0 || o.Cap < 0 || o.HalfLife < 0 || o.MaxModels < 0 {
		return nil, errors.New("reserve: min samples, floor, cap, half life and max models must not be negative")
	}
	o.MinSamples = cmpOr(o.MinSamples, DefaultMinSamples)
	o.Floor = cmpOr(o.Floor, DefaultFloor)
	o.Cap = cmpOr(o.Cap, DefaultCap)
	o.HalfLife = cmpOr(o.HalfLife, DefaultHalfLife)
	o.MaxModels = cmpOr(o.MaxModels, DefaultMaxModels)
	if o.Floor > o.Cap {
		return nil, fmt.Errorf("reserve: floor %d is above cap %d", o.Floor, o.Cap)
	}
	return &Learner{opt: o, models: make(map[string]*model)}, nil
}

func cmpOr[T int | int64](v, d T) T {
	if v == 0 {
		return d
	}
	return v
}

// Options are the learner's options, defaults filled in.
func (l *Learner) Options() Options { return l.opt }

// Reservation is the output to reserve per completion, in tokens, for a
// request to the model whose sketch key is key (see Key) that names no
// maximum: the learned quantile clamped to [Floor, min(Cap, ceiling)]
// (ceiling 0: no ceiling of its own) once the key has MinSamples outputs;
// fallback otherwise, with learned false.
func (l *Learner) Reservation(key string, fallback, ceiling int64) (tokens int64, learned bool) {
	l.mu.RLock()
	m := l.models[key]
	l.mu.RUnlock()
	if m == nil {
		return fallback, false
	}
	q := m.learned.Load()
	if q == 0 && m.samples.Load() < l.opt.MinSamples {
		return fallback, false
	}
	hi := l.opt.Cap
	if ceiling > 0 {
		hi = min(hi, ceiling)
	}
	return min(max(q, l.opt.Floor), hi), true
}

// Key is the sketch key of a model: its priced name when it is priced
// (bounded by the configuration), Shared otherwise.
func Key(pricedName string, priced bool) string {
	if !priced || pricedName == "" {
		return Shared
	}
	return pricedName
}

// Observe records that a request to key which named no maximum produced
// output tokens per completion. A key past MaxModels goes to Shared.
func (l *Learner) Observe(key string, output int64) {
	m := l.model(key)
	m.mu.Lock()
	m.sketch.Add(output)
	n := m.sketch.Count()
	if n >= l.opt.MinSamples {
		m.learned.Store(max(m.sketch.Quantile(l.opt.Quantile), 1))
	}
	m.mu.Unlock()
	m.samples.Store(n)
}

// model returns key's model, created on first use; Shared's past MaxModels.
func (l *Learner) model(key string) *model {
	l.mu.RLock()
	m := l.models[key]
	l.mu.RUnlock()
	if m != nil {
		return m
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if m = l.models[key]; m != nil {
		return m
	}
	if len(l.models) >= l.opt.MaxModels-1 && key != Shared { // one place kept for Shared
		key = Shared
		if m = l.models[key]; m != nil {
			return m
		}
	}
	m = &model{sketch: NewSketch(l.opt.HalfLife)}
	l.models[key] = m
	return m
}

// Learned calls fn with each sketch key, its learned quantile in tokens
// (0 while it has fewer than MinSamples outputs) and its output count.
func (l *Learner) Learned(fn func(key string, quantile, samples int64)) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	for k, m := range l.models {
		fn(k, m.learned.Load(), m.samples.Load())
	}
}

// Len is the number of sketches held.
func (l *Learner) Len() int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return len(l.models)
}
