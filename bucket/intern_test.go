package bucket

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// internedArgs builds the KEYS and ARGV of one reconcile.lua call and one
// takebatch.lua call from the cases drawn by the seeds (each case's keys
// under its own hash tag, so that several cases make a call of many
// keys, limits and shapes: past internScan), by the store's builders and
// by the map-based ones of d920abb, and reports every difference.
func internedArgs(t testing.TB, rnd *rand.Rand, cases int) {
	t.Helper()
	r, err := NewRedis(RedisOptions{Client: redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}), Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	newCall, oldCall := r.newReconcileCall(), newMapReconcileCall(r)
	var takes []*queuedTake
	owner := 0
	for c := range cases {
		tag := fmt.Sprintf("t%d", c)
		lc := randomLayoutCase(rnd)
		for _, e := range lc.entries {
			deltas := make([]Delta, len(e.keys))
			for i, k := range e.keys {
				deltas[i] = Delta{Key: layoutKey(tag, k), Limit: e.limits[i], Units: e.units[i]}
			}
			newCall.add(owner, e.id, deltas, e.idx, e.mode)
			oldCall.add(owner, e.id, deltas, e.idx, e.mode)
			owner++
		}
		tc := randomTakeLayoutCase(rnd)
		for _, e := range tc.takes {
			items := make([]Item, len(e.keys))
			for j, k := range e.keys {
				items[j] = Item{Key: layoutKey(tag, k), Limit: e.lims[j], Cost: e.costs[j]}
			}
			k, a := r.takeArgs(e.id, items, nil, true)
			takes = append(takes, &queuedTake{ctx: context.Background(), keys: k, args: a})
		}
	}
	if got, want := newCall.keys(), oldCall.keys; !reflect.DeepEqual(got, want) && len(got)+len(want) > 0 {
		t.Errorf("reconcile KEYS %q, the maps' %q", got, want)
	}
	if got, want := newCall.args(r), oldCall.args(r); !reflect.DeepEqual(got, want) {
		t.Errorf("reconcile ARGV %v, the maps' %v", got, want)
	}
	if got, want := newCall.owners, oldCall.owners; !reflect.DeepEqual(got, want) && len(got)+len(want) > 0 {
		t.Errorf("reconcile owners %v, the maps' %v", got, want)
	}
	if len(takes) == 0 {
		return
	}
	gotKeys, gotArgs := batchArgs(takes)
	wantKeys, wantArgs := mapBatchArgs(takes)
	if !reflect.DeepEqual(gotKeys, wantKeys) {
		t.Errorf("takebatch KEYS %q, the maps' %q", gotKeys, wantKeys)
	}
	if !reflect.DeepEqual(gotArgs, wantArgs) {
		t.Errorf("takebatch ARGV %v, the maps' %v", gotArgs, wantArgs)
	}
}

// TestInternedArgsMatchMaps: the reconcile.lua and takebatch.lua calls the
// shared interner builds (a few values scanned, a map past internScan) are
// those the builders of d920abb built with their own maps, value for value,
// for calls of one case (few keys) to four (dozens).
func TestInternedArgsMatchMaps(t *testing.T) {
	rnd := rand.New(rand.NewPCG(3, 7))
	for i := range 400 {
		internedArgs(t, rnd, 1+i%4)
	}
}

// FuzzInternedArgs is TestInternedArgsMatchMaps driven by the fuzzer:
//
//	go test -run X -fuzz FuzzInternedArgs -fuzztime 60s ./bucket/
func FuzzInternedArgs(f *testing.F) {
	f.Add(uint64(3), uint64(7), uint8(1))
	f.Add(uint64(9), uint64(1), uint8(4))
	f.Fuzz(func(t *testing.T, s1, s2 uint64, cases uint8) {
		internedArgs(t, rand.New(rand.NewPCG(s1, s2)), 1+int(cases%6))
	})
}

// FuzzIndex: an index numbers the values added to it as a map from value
// to its order of first use would, through its scan and past internScan.
func FuzzIndex(f *testing.F) {
	f.Add([]byte("abcabcdefghijklmnopa"))
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 0, 9, 8, 1})
	f.Fuzz(func(t *testing.T, vals []byte) {
		var x index[byte]
		want := map[byte]int{}
		for i, v := range vals {
			w, seen := want[v]
			if !seen {
				w = len(want) + 1
				want[v] = w
			}
			got, added := x.add(v)
			if got != w || added == seen {
				t.Fatalf("add %d (#%d): %d, %v; want %d, %v", v, i, got, added, w, !seen)
			}
		}
		if x.len() != len(want) {
			t.Fatalf("len %d, want %d", x.len(), len(want))
		}
	})
}
