package bucket

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/llmguard/llmguard/internal/redistest"
)

// FuzzMarkerEpoch checks markerEpoch on any id: it accepts exactly 24
// lowercase hex digits, alone or before a "/", and its epoch is the first 8
// digits' seconds divided by epochSeconds; NewRequestID's ids round-trip.
func FuzzMarkerEpoch(f *testing.F) {
	f.Add("")
	f.Add("e236aaf0a41f6137")
	f.Add(NewRequestID(t0))
	f.Add(NewRequestID(t0) + "/shadow")
	f.Add(NewRequestID(t0) + "x")
	f.Add("692e1a40E236AAF0A41F6137")
	f.Add("lease:node:1")
	f.Fuzz(func(t *testing.T, id string) {
		epoch, ok := markerEpoch(id)
		want := len(id) >= 24 && (len(id) == 24 || id[24] == '/')
		for i := 0; want && i < 24; i++ {
			c := id[i]
			want = '0' <= c && c <= '9' || 'a' <= c && c <= 'f'
		}
		if ok != want {
			t.Fatalf("markerEpoch(%q) ok = %v, want %v", id, ok, want)
		}
		if !ok {
			return
		}
		s, err := strconv.ParseUint(id[:8], 16, 32)
		if err != nil || epoch != strconv.FormatUint(s/epochSeconds, 10) {
			t.Fatalf("markerEpoch(%q) = %q", id, epoch)
		}
		now := time.Unix(int64(s), 0)
		if e, ok := markerEpoch(NewRequestID(now)); !ok || e != epoch {
			t.Fatalf("NewRequestID(%v) has epoch %q, %v; want %q", now, e, ok, epoch)
		}
	})
}

// TestReconcileMarkerSets runs reconciliations of NewRequestID's ids, whose
// markers are members of their epoch's set, on miniredis and a real
// redis-server: an id applies once, within a batch (named twice) and across
// batches (a retry of the whole batch, as AsyncReconciler's next attempt);
// ids of two epochs go to two sets; an id and one derived from it ("/…")
// are two ids; the set lives DedupFor past its last write; an id of another
// form keeps its marker key; a request's in-flight slot is released by its
// reconciliation (the member is the holder).
func TestReconcileMarkerSets(t *testing.T) {
	t.Run("miniredis", func(t *testing.T) {
		mr := miniredis.RunT(t)
		c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
		defer c.Close()
		testMarkerSets(t, c, true)
	})
	t.Run("redis-server", func(t *testing.T) {
		testMarkerSets(t, redistest.Shared(t).Client(), false)
	})
}

func testMarkerSets(t *testing.T, c *redis.Client, exactTTL bool) {
	ctx := context.Background()
	now := t0
	r, err := NewRedis(RedisOptions{Client: c, Now: func() time.Time { return now }, DedupFor: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	lim := Limit{Capacity: 1000, Rate: 1, Per: time.Hour}
	key := "ms:{m}:tb"
	level := func() int64 {
		d, err := r.Take(ctx, "", []Item{{Key: key, Limit: lim}})
		if err != nil {
			t.Fatal(err)
		}
		return d.Buckets[0].Remaining
	}
	charge := func(id string, units int64) Reconciliation {
		return Reconciliation{RequestID: id, Deltas: []Delta{{Key: key, Limit: lim, Units: units}}}
	}
	a, b := NewRequestID(t0), NewRequestID(t0.Add(time.Second))
	later := NewRequestID(t0.Add(epochSeconds * time.Second))
	batch := []Reconciliation{charge(a, 10), charge(b, 20), charge(a, 40), charge(later, 100), charge(a+"/shadow", 200)}
	for attempt := range 2 {
		for i, err := range r.ReconcileBatch(ctx, batch) {
			if err != nil {
				t.Fatalf("attempt %d, element %d: %v", attempt+1, i, err)
			}
		}
		if got := level(); got != 1000-10-20-100-200 {
			t.Fatalf("attempt %d: level %d, want %d (a once, b, later and a's derived id)", attempt+1, got, 1000-330)
		}
	}
	epochA, _ := markerEpoch(a)
	epochLater, _ := markerEpoch(later)
	if epochA == epochLater {
		t.Fatalf("ids %s and %s share epoch %s", a, later, epochA)
	}
	setA, setLater := markerSetKey(key, epochA), markerSetKey(key, epochLater)
	members, err := c.SMembers(ctx, setA).Result()
	if err != nil || len(members) != 3 {
		t.Fatalf("%s holds %v (%v), want a, b and a/shadow", setA, members, err)
	}
	for _, id := range []string{a, b, a + "/shadow"} {
		if !c.SIsMember(ctx, setA, id).Val() {
			t.Errorf("%s lacks %s", setA, id)
		}
	}
	if !c.SIsMember(ctx, setLater, later).Val() {
		t.Errorf("%s lacks %s", setLater, later)
	}
	for _, s := range []string{setA, setLater} {
		ttl := c.PTTL(ctx, s).Val()
		if ttl <= 0 || ttl > time.Minute || exactTTL && ttl != time.Minute {
			t.Errorf("%s expires in %v, want DedupFor (1m)", s, ttl)
		}
	}
	if n := c.Exists(ctx, markerKey(key, a)).Val(); n != 0 {
		t.Errorf("a NewRequestID id left a marker key")
	}
	// An id of another form keeps its own marker key, once.
	for range 2 {
		if err := r.Reconcile(ctx, "req-1", []Delta{{Key: key, Limit: lim, Units: 5}}); err != nil {
			t.Fatal(err)
		}
	}
	if got := level(); got != 1000-335 {
		t.Errorf("level %d after req-1 twice, want %d", got, 1000-335)
	}
	if c.Exists(ctx, markerKey(key, "req-1")).Val() != 1 {
		t.Errorf("req-1 has no marker key")
	}
	// The in-flight slot of a request is released by its reconciliation.
	slots := Limit{Capacity: 1, Concurrent: true, Per: time.Minute}
	held := NewRequestID(t0)
	d, err := r.Take(ctx, held, []Item{{Key: "ms:{m}:inflight", Limit: slots, Cost: 1}})
	if err != nil || !d.Allowed {
		t.Fatalf("take of a slot: %+v, %v", d, err)
	}
	if err := r.Reconcile(ctx, held, []Delta{{Key: "ms:{m}:inflight", Limit: slots, Units: -1}}); err != nil {
		t.Fatal(err)
	}
	d, err = r.Take(ctx, NewRequestID(t0), []Item{{Key: "ms:{m}:inflight", Limit: slots, Cost: 1}})
	if err != nil || !d.Allowed {
		t.Errorf("the slot was not released by the reconciliation: %+v, %v", d, err)
	}
}

// TestReconcileMarkerSetsCluster reconciles a NewRequestID id whose deltas
// lie in two slots of a 3-master Redis Cluster, twice (a retried batch):
// each slot's group applies once, and each records the id in its own
// slot's set.
func TestReconcileMarkerSetsCluster(t *testing.T) {
	ctx := context.Background()
	c := redistest.SharedCluster(t, 3).Client()
	now := t0
	r, err := NewRedis(RedisOptions{Client: c, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Load(ctx); err != nil {
		t.Fatal(err)
	}
	lim := Limit{Capacity: 1000, Rate: 1, Per: time.Hour}
	keys := []string{"llmguard:{acme}:tpm:alice", "llmguard:{global}:tpm"}
	if slotOf(keys[0]) == slotOf(keys[1]) {
		t.Fatal("the keys share a slot: the test needs two")
	}
	id := NewRequestID(t0)
	batch := []Reconciliation{{RequestID: id, Deltas: []Delta{{Key: keys[0], Limit: lim, Units: 7}, {Key: keys[1], Limit: lim, Units: 9}}}}
	for attempt := range 2 {
		for _, err := range r.ReconcileBatch(ctx, batch) {
			if err != nil {
				t.Fatalf("attempt %d: %v", attempt+1, err)
			}
		}
	}
	d, err := r.Take(ctx, "", []Item{{Key: keys[0], Limit: lim}, {Key: keys[1], Limit: lim}})
	if err != nil {
		t.Fatal(err)
	}
	if d.Buckets[0].Remaining != 993 || d.Buckets[1].Remaining != 991 {
		t.Errorf("remaining %d and %d after two attempts, want 993 and 991 (once each)", d.Buckets[0].Remaining, d.Buckets[1].Remaining)
	}
	epoch, _ := markerEpoch(id)
	for _, k := range keys {
		if !c.SIsMember(ctx, markerSetKey(k, epoch), id).Val() {
			t.Errorf("the set of %s's slot lacks %s", k, id)
		}
	}
}

// TestTakeMarkerSets takes and voids ids of NewRequestID's form, on
// miniredis, a real redis-server and a 3-master cluster, each take alone
// (take.lua: the id's marker key says "t") and each in a batch
// (takebatch.lua: the id goes in its epoch's taken set instead): a take's
// Void refunds it once; a Void before its take leaves the take voided (it
// applies nothing); a denied take leaves no marker; the taken set lives
// VoidFor past its last write. In the cluster a take denied by its second
// slot group refunds the first as that group's Void, so the caller's Void
// refunds nothing more.
func TestTakeMarkerSets(t *testing.T) {
	for _, batched := range []bool{false, true} {
		name := map[bool]string{false: "alone", true: "batched"}[batched]
		t.Run("miniredis/"+name, func(t *testing.T) {
			mr := miniredis.RunT(t)
			c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
			defer c.Close()
			testTakeMarkerSets(t, c, c, batched, true)
		})
		t.Run("redis-server/"+name, func(t *testing.T) {
			c := redistest.Shared(t).Client()
			testTakeMarkerSets(t, c, c, batched, false)
		})
		t.Run("cluster/"+name, func(t *testing.T) {
			c := redistest.SharedCluster(t, 3).Client()
			testTakeMarkerSets(t, c, c, batched, false)
		})
	}
}

func testTakeMarkerSets(t *testing.T, client RedisScripter, kv redis.Cmdable, batched, exactTTL bool) {
	ctx := context.Background()
	now := t0
	r, err := NewRedis(RedisOptions{Client: client, Now: func() time.Time { return now }, VoidFor: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if batched {
		r.SendTakesAsBatches()
	}
	if err := r.Load(ctx); err != nil {
		t.Fatal(err)
	}
	lim := Limit{Capacity: 100, Rate: 1, Per: time.Hour}
	tenant, global := "tm:{acme}:tpm", "tm:{global}:rpm"
	items := func(user, glob int64) []Item {
		return []Item{{Key: tenant, Limit: lim, Cost: user}, {Key: global, Limit: lim, Cost: glob}}
	}
	remaining := func() (int64, int64) {
		d, err := r.Take(ctx, "", items(0, 0))
		if err != nil {
			t.Fatal(err)
		}
		return d.Buckets[0].Remaining, d.Buckets[1].Remaining
	}
	want := func(step string, a, b int64) {
		t.Helper()
		if x, y := remaining(); x != a || y != b {
			t.Errorf("%s: remaining %d and %d, want %d and %d", step, x, y, a, b)
		}
	}
	if _, err := r.Take(ctx, NewRequestID(t0), items(30, 30)); err != nil {
		t.Fatal(err)
	}
	id := NewRequestID(t0)
	if d, err := r.Take(ctx, id, items(10, 20)); err != nil || !d.Allowed {
		t.Fatalf("take: %+v, %v", d, err)
	}
	want("taken", 60, 50)
	epoch, _ := markerEpoch(id)
	inSet, marker := kv.SIsMember(ctx, takenSetKey(tenant, epoch), id).Val(), kv.Get(ctx, takeMarkerKey(tenant, id)).Val()
	if batched && (!inSet || marker != "") || !batched && (inSet || marker != "t") {
		t.Errorf("after the take: in the taken set %v, marker key %q", inSet, marker)
	}
	if ttl := kv.PTTL(ctx, takenSetKey(tenant, epoch)).Val(); batched && (ttl <= 0 || ttl > 30*time.Second || exactTTL && ttl != 30*time.Second) {
		t.Errorf("the taken set expires in %v, want VoidFor (30s)", ttl)
	}
	for range 2 {
		if err := r.Void(ctx, id, items(10, 20)); err != nil {
			t.Fatal(err)
		}
	}
	want("voided twice", 70, 70)
	if m := kv.Get(ctx, takeMarkerKey(tenant, id)).Val(); m != "v" {
		t.Errorf("after the void the marker key is %q, want v", m)
	}
	// A Void that reaches Redis before its take: the take applies nothing.
	late := NewRequestID(t0)
	if err := r.Void(ctx, late, items(5, 5)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Take(ctx, late, items(5, 5)); !errors.Is(err, ErrVoided) {
		t.Errorf("a take after its Void: %v, want ErrVoided", err)
	}
	want("voided before its take", 70, 70)
	// A denied take leaves no marker: its Void refunds nothing.
	denied := NewRequestID(t0)
	if d, err := r.Take(ctx, denied, items(10, 101)); err != nil || d.Allowed {
		t.Fatalf("a take over capacity: %+v, %v", d, err)
	}
	if err := r.Void(ctx, denied, items(10, 101)); err != nil {
		t.Fatal(err)
	}
	want("denied, then voided", 70, 70)
	// Denied by the global bucket after the tenant's took (in a cluster,
	// another slot group): nothing stays spent, and the Void refunds
	// nothing more.
	short := NewRequestID(t0)
	if _, err := r.Take(ctx, NewRequestID(t0), items(0, 65)); err != nil {
		t.Fatal(err)
	}
	if d, err := r.Take(ctx, short, items(30, 10)); err != nil || d.Allowed {
		t.Fatalf("a take the global bucket denies: %+v, %v", d, err)
	}
	if err := r.Void(ctx, short, items(30, 10)); err != nil {
		t.Fatal(err)
	}
	want("denied by the second group, then voided", 70, 5)
}

// FuzzTakenSetOf checks takenSetOf on any text (no panic; ok only for a
// marker of an id of NewRequestID's form) and on the marker key of any
// bucket key and id: it finds the id and the taken set of its epoch in the
// key's slot, and voidedSetOf turns that set into the voided set of the
// same epoch and slot (voidedSetKey).
func FuzzTakenSetOf(f *testing.F) {
	f.Add("llmguard:{acme}:tpm:alice", NewRequestID(t0), "")
	f.Add("nokey", NewRequestID(t0)+"/shadow", "llmguard:{x}::tk:")
	f.Add("a:{}:b", "req-1", "}::tk:")
	f.Fuzz(func(t *testing.T, key, id, text string) {
		if set, _, ok := takenSetOf(text); ok {
			voidedSetOf(set)
		}
		set, got, ok := takenSetOf(takeMarkerKey(key, id))
		epoch, want := markerEpoch(id)
		if ok != want {
			t.Fatalf("takenSetOf(%q) ok = %v, want %v", takeMarkerKey(key, id), ok, want)
		}
		if ok && (got != id || set != takenSetKey(key, epoch) || slotOf(set) != slotOf(key)) {
			t.Fatalf("takenSetOf(%q) = %q, %q", takeMarkerKey(key, id), set, got)
		}
		if ok && voidedSetOf(set) != voidedSetKey(key, epoch) {
			t.Fatalf("voidedSetOf(%q) = %q, want %q", set, voidedSetOf(set), voidedSetKey(key, epoch))
		}
	})
}

// putRequestIDPerDigit is putRequestID as first written, a table look-up
// per digit: the reference the word-at-a-time digits must agree with.
func putRequestIDPerDigit(dst *[RequestIDLen]byte, s uint32, v uint64) {
	const hexDigits = "0123456789abcdef"
	for i := range 8 {
		dst[i] = hexDigits[(s>>(28-4*i))&15]
	}
	for i := range 8 {
		b := byte(v >> (8 * i))
		dst[8+2*i], dst[9+2*i] = hexDigits[b>>4], hexDigits[b&15]
	}
}

// TestPutRequestIDSameAsPerDigit: for every value of each byte in every
// place, and for random seconds and bits, the id is the per-digit one.
func TestPutRequestIDSameAsPerDigit(t *testing.T) {
	check := func(s uint32, v uint64) {
		var got, want [RequestIDLen]byte
		putRequestID(&got, s, v)
		putRequestIDPerDigit(&want, s, v)
		if got != want {
			t.Fatalf("s %#x v %#x: %q, want %q", s, v, got[:], want[:])
		}
	}
	for place := range 8 {
		for b := range 256 {
			check(uint32(b)<<(8*(place%4)), uint64(b)<<(8*place))
			check(^(uint32(b) << (8 * (place % 4))), ^(uint64(b) << (8 * place)))
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 100_000 {
		check(r.Uint32(), r.Uint64())
	}
}

// FuzzPutRequestID: any second and bits give the per-digit id.
func FuzzPutRequestID(f *testing.F) {
	f.Add(uint32(0), uint64(0))
	f.Add(uint32(0x6a5f3c10), uint64(0xfedcba9876543210))
	f.Fuzz(func(t *testing.T, s uint32, v uint64) {
		var got, want [RequestIDLen]byte
		putRequestID(&got, s, v)
		putRequestIDPerDigit(&want, s, v)
		if got != want {
			t.Fatalf("s %#x v %#x: %q, want %q", s, v, got[:], want[:])
		}
	})
}
