package keystore

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmguard/llmguard/internal/redistest"
)

var ops = Actor{Name: "ops", Auth: "token"}

// Concurrent changes all land, each with its own revision, and each is in
// the audit stream once.
func TestRegistryConcurrentCreates(t *testing.T) {
	srv := redistest.Start(t)
	r := NewRegistry(RegistryOptions{Client: srv.Client()})
	ctx := context.Background()
	var wg sync.WaitGroup
	var mu sync.Mutex
	revs := map[int64]bool{}
	for range 8 {
		wg.Go(func() {
			for range 5 {
				_, rec, err := r.Create(ctx, Spec{Tenant: "acme"}, ops, t0)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if revs[rec.Rev] {
					t.Errorf("revision %d given twice", rec.Rev)
				}
				revs[rec.Rev] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	snap, err := r.List(ctx)
	if err != nil || len(snap.Records) != 40 || snap.Rev != 40 {
		t.Fatalf("list: %d records, rev %d, %v", len(snap.Records), snap.Rev, err)
	}
	if n, _ := srv.Client().XLen(ctx, AuditKey).Result(); n != 40 {
		t.Errorf("audit stream holds %d entries, want 40", n)
	}
}

func TestRegistryLifecycle(t *testing.T) {
	srv := redistest.Start(t)
	r := NewRegistry(RegistryOptions{Client: srv.Client(), MaxKeys: 3})
	ctx := context.Background()
	secret, rec, err := r.Create(ctx, Spec{Tenant: "acme", User: "al", Plan: "pro", ExpiresAt: t0.Add(48 * time.Hour).Truncate(time.Second)}, ops, t0)
	if err != nil || rec.User != "al" || Hash(secret) != rec.SHA256 {
		t.Fatalf("create: %+v %v", rec, err)
	}
	// step 1: rotate with a grace of an hour: the old key expires then.
	_, next, old, err := r.Rotate(ctx, rec.ID, time.Hour, ops, t0)
	if err != nil {
		t.Fatal(err)
	}
	if !old.ExpiresAt.Equal(t0.Add(time.Hour).Truncate(time.Second)) || !old.RevokedAt.IsZero() || old.RotatedTo != next.ID ||
		next.RotatedFrom != rec.ID || !next.ExpiresAt.Equal(rec.ExpiresAt) || next.Plan != "pro" {
		t.Errorf("step 1 (rotate with grace): old %+v next %+v", old, next)
	}
	// A key is rotated once: rotating the old key again (or a second
	// concurrent rotation) is refused, so one key has one successor.
	if _, _, _, err := r.Rotate(ctx, rec.ID, time.Hour, ops, t0); !errors.Is(err, ErrRotated) {
		t.Errorf("step 1 (rotate the old key again): %v, want ErrRotated", err)
	}
	// step 2: the registry is full (3 keys): a create is refused.
	if _, _, err := r.Create(ctx, Spec{Tenant: "acme"}, ops, t0); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.Create(ctx, Spec{Tenant: "acme"}, ops, t0); !errors.Is(err, ErrFull) {
		t.Errorf("step 2 (full): %v", err)
	}
	// step 3: revoke; again; unknown ids.
	if _, _, err := r.Revoke(ctx, next.ID, ops, t0); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.Revoke(ctx, next.ID, ops, t0); !errors.Is(err, ErrRevoked) {
		t.Errorf("step 3 (revoke twice): %v", err)
	}
	if _, _, _, err := r.Rotate(ctx, next.ID, 0, ops, t0); !errors.Is(err, ErrRevoked) {
		t.Errorf("step 3 (rotate a revoked key): %v", err)
	}
	for _, id := range []string{"0123456789abcdef", "../../etc", ""} {
		if _, err := r.Get(ctx, id); !errors.Is(err, ErrNotFound) {
			t.Errorf("step 3 (get %q): %v", id, err)
		}
	}
	// step 4: the audit stream, newest first.
	es, err := r.Audit(ctx, 10)
	if err != nil || len(es) != 4 || es[0].Action != "revoke" || es[3].Action != "create" || es[2].Action != "rotate" ||
		es[2].KeyID != rec.ID || es[3].Actor != "ops" || es[3].Auth != "token" || !es[3].At.Equal(t0) {
		t.Errorf("step 4 (audit): %+v %v", es, err)
	}
}

// A registry holding garbage (written by hand, or a hostile Redis) is read
// around: the bad fields are counted and skipped.
func TestRegistryListSkipsGarbage(t *testing.T) {
	srv := redistest.Start(t)
	r := NewRegistry(RegistryOptions{Client: srv.Client()})
	ctx := context.Background()
	_, rec, err := r.Create(ctx, Spec{Tenant: "acme"}, ops, t0)
	if err != nil {
		t.Fatal(err)
	}
	srv.Client().HSet(ctx, RegistryKey, "garbage", "{not json", "0000000000000000", `{"id":"0000000000000000"}`)
	snap, err := r.List(ctx)
	if err != nil || len(snap.Records) != 1 || snap.Records[0].ID != rec.ID || snap.Bad != 2 {
		t.Errorf("list: %+v %v", snap, err)
	}
}

// A revision written by hand below zero is refused, not turned into a
// record every node's parser refuses.
func TestRegistryRefusesNegativeRevision(t *testing.T) {
	srv := redistest.Start(t)
	r := NewRegistry(RegistryOptions{Client: srv.Client()})
	ctx := context.Background()
	if err := srv.Client().Set(ctx, RevKey, "-5", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if _, rec, err := r.Create(ctx, Spec{Tenant: "acme"}, ops, t0); err == nil || isSentinel(err) {
		t.Fatalf("create at revision -5: %+v %v, want a store error", rec, err)
	}
	if n, _ := srv.Client().HLen(ctx, RegistryKey).Result(); n != 0 {
		t.Errorf("%d records written", n)
	}
}

// A registry value far over MaxRecordBytes (written straight into Redis)
// is counted as bad without leaving Redis: the scan replaces it with "",
// so a node never reads it whole, at any resync.
func TestRegistryListBoundsValues(t *testing.T) {
	srv := redistest.Start(t)
	r := NewRegistry(RegistryOptions{Client: srv.Client()})
	ctx := context.Background()
	_, rec, err := r.Create(ctx, Spec{Tenant: "acme"}, ops, t0)
	if err != nil {
		t.Fatal(err)
	}
	huge := strings.Repeat("x", 8<<20)
	srv.Client().HSet(ctx, RegistryKey, "0000000000000000", huge)
	kv, next, err := scanBounded(ctx, srv.Client(), 0)
	if err != nil || next != 0 || len(kv) != 4 {
		t.Fatalf("scan: %d items, next %d, %v", len(kv), next, err)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		if len(kv[i+1]) > MaxRecordBytes {
			t.Errorf("field %s came back with %d bytes, over MaxRecordBytes", kv[i], len(kv[i+1]))
		}
	}
	snap, err := r.List(ctx)
	if err != nil || len(snap.Records) != 1 || snap.Records[0].ID != rec.ID || snap.Bad != 1 {
		t.Errorf("list: %+v %v", snap, err)
	}
}

// Revoking a key ends the grace of the keys it replaced: A rotated to B
// with an hour's grace, B to C at once; revoking C revokes A too (B is
// already revoked), in the same change and audit entry. A predecessor
// whose grace has already ended is left as it is (trial11: a revoked
// successor left the old secret working until its grace ended).
func TestRevokeEndsPredecessorsGrace(t *testing.T) {
	for _, tc := range []struct {
		name  string
		at    time.Duration // after t0, when C is revoked
		ended bool          // whether A is revoked with C
	}{
		{"in grace", 10 * time.Minute, true},
		{"grace over", 2 * time.Hour, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.Start(t)
			r := NewRegistry(RegistryOptions{Client: srv.Client()})
			ctx := context.Background()
			_, a, err := r.Create(ctx, Spec{Tenant: "acme"}, ops, t0)
			if err != nil {
				t.Fatal(err)
			}
			_, b, _, err := r.Rotate(ctx, a.ID, time.Hour, ops, t0)
			if err != nil {
				t.Fatal(err)
			}
			_, c, _, err := r.Rotate(ctx, b.ID, 0, ops, t0.Add(time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			_, other, err := r.Create(ctx, Spec{Tenant: "acme"}, ops, t0)
			if err != nil {
				t.Fatal(err)
			}
			at := t0.Add(tc.at)
			rec, ended, err := r.Revoke(ctx, c.ID, ops, at)
			if err != nil || rec.ID != c.ID || rec.Status(at) != StatusRevoked {
				t.Fatalf("revoke: %+v %v", rec, err)
			}
			gotA, err := r.Get(ctx, a.ID)
			if err != nil {
				t.Fatal(err)
			}
			es, err := r.Audit(ctx, 1)
			if err != nil || len(es) != 1 || es[0].Action != "revoke" || es[0].KeyID != c.ID {
				t.Fatalf("audit: %+v %v", es, err)
			}
			if tc.ended {
				if len(ended) != 1 || ended[0].ID != a.ID || !ended[0].RevokedAt.Equal(at) || ended[0].RevokedBy != ops.Name {
					t.Errorf("ended = %+v, want A revoked at %v", ended, at)
				}
				if gotA.Status(at) != StatusRevoked || !gotA.RevokedAt.Equal(at) {
					t.Errorf("A stored as %+v, want revoked at %v", gotA, at)
				}
				if !strings.Contains(es[0].Detail, a.ID) {
					t.Errorf("audit detail %q does not name A", es[0].Detail)
				}
			} else {
				if len(ended) != 0 || gotA.Status(at) != StatusExpired || !gotA.RevokedAt.IsZero() {
					t.Errorf("ended = %+v, A stored as %+v: want A left expired", ended, gotA)
				}
			}
			if gotB, err := r.Get(ctx, b.ID); err != nil || !gotB.RevokedAt.Equal(t0.Add(time.Minute)) {
				t.Errorf("B stored as %+v %v, want revoked at its rotation", gotB, err)
			}
			if gotO, err := r.Get(ctx, other.ID); err != nil || gotO.Status(at) != StatusActive {
				t.Errorf("an unrelated key stored as %+v %v", gotO, err)
			}
		})
	}
}
