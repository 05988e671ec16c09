package dashboards

import (
	"context"
	"sort"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/util/annotations"
)

// memStorage is an in-memory storage.Queryable of float samples appended
// in time order: enough for the query engine over a few scrapes, without
// the TSDB (whose package pulls in service discovery and its cloud SDKs).
// Not safe for concurrent appends.
type memStorage struct {
	series map[string]*memSeries // by labels.String()
}

type memSeries struct {
	lset    labels.Labels
	samples []chunks.Sample
}

func (m *memStorage) append(l labels.Labels, t int64, v float64) {
	k := l.String()
	s, ok := m.series[k]
	if !ok {
		s = &memSeries{lset: l}
		m.series[k] = s
	}
	s.samples = append(s.samples, fsample{t: t, f: v})
}

// matching returns the series every matcher accepts, sorted by labels.
func (m *memStorage) matching(ms []*labels.Matcher) []*memSeries {
	var out []*memSeries
	for _, s := range m.series {
		ok := true
		for _, mt := range ms {
			if !mt.Matches(s.lset.Get(mt.Name)) {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return labels.Compare(out[i].lset, out[j].lset) < 0 })
	return out
}

func (m *memStorage) Querier(mint, maxt int64) (storage.Querier, error) {
	return &memQuerier{m: m, mint: mint, maxt: maxt}, nil
}

type memQuerier struct {
	m          *memStorage
	mint, maxt int64
}

func (q *memQuerier) Select(_ context.Context, _ bool, _ *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
	var out []storage.Series
	for _, s := range q.m.matching(ms) {
		var in []chunks.Sample
		for _, smp := range s.samples {
			if smp.T() >= q.mint && smp.T() <= q.maxt {
				in = append(in, smp)
			}
		}
		if len(in) > 0 {
			out = append(out, storage.NewListSeries(s.lset, in))
		}
	}
	return &seriesSet{series: out, i: -1}
}

func (q *memQuerier) LabelValues(context.Context, string, *storage.LabelHints, ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	return nil, nil, nil
}

func (q *memQuerier) LabelNames(context.Context, *storage.LabelHints, ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	return nil, nil, nil
}

func (q *memQuerier) Close() error { return nil }

type seriesSet struct {
	series []storage.Series
	i      int
}

func (s *seriesSet) Next() bool                        { s.i++; return s.i < len(s.series) }
func (s *seriesSet) At() storage.Series                { return s.series[s.i] }
func (s *seriesSet) Err() error                        { return nil }
func (s *seriesSet) Warnings() annotations.Annotations { return nil }

// fsample is a float sample.
type fsample struct {
	t int64
	f float64
}

func (s fsample) T() int64                      { return s.t }
func (s fsample) ST() int64                     { return 0 }
func (s fsample) F() float64                    { return s.f }
func (s fsample) H() *histogram.Histogram       { return nil }
func (s fsample) FH() *histogram.FloatHistogram { return nil }
func (s fsample) Type() chunkenc.ValueType      { return chunkenc.ValFloat }
func (s fsample) Copy() chunks.Sample           { return s }
