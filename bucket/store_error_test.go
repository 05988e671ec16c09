package bucket_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/llmguard/llmguard/bucket"
)

// Every store failure is a *bucket.StoreError naming its operation and
// subject in fields (what Guarded reads with errors.As, where it used to
// parse the text), wrapping the sentinel callers branch on, with the text
// operators have always read.
func TestStoreFailuresAreStoreErrors(t *testing.T) {
	ctx := context.Background()
	mem := bucket.NewMemory(bucket.MemoryOptions{})
	closed := bucket.NewAsyncReconciler(mem, bucket.AsyncOptions{})
	closed.Close()
	bad := bucket.Limit{Capacity: -1, Rate: 1, Per: time.Hour}
	for _, tc := range []struct {
		name              string
		call              func() error
		op, subject, text string
		sentinel          error
	}{
		{name: "memory take, negative cost", call: func() error { _, err := mem.Take(ctx, "", item("k", -1)); return err },
			op: "take", subject: "k", sentinel: bucket.ErrInvalid, text: `bucket: take "k": cost -1 is negative: invalid input`},
		{name: "memory take, a key twice", call: func() error {
			_, err := mem.Take(ctx, "", append(item("k", 1), item("k", 1)...))
			return err
		}, op: "take", subject: "k", sentinel: bucket.ErrInvalid, text: `bucket: take "k": key appears twice: invalid input`},
		{name: "memory reconcile, an invalid limit", call: func() error {
			return mem.Reconcile(ctx, "req-1", []bucket.Delta{{Key: "k", Limit: bad, Units: 1}})
		}, op: "reconcile", subject: "req-1", sentinel: bucket.ErrInvalid},
		{name: "memory void, no request id", call: func() error { return mem.Void(ctx, "", item("k", 1)) },
			op: "void", sentinel: bucket.ErrInvalid, text: `bucket: void: no request id: invalid input`},
		{name: "asynchronous reconcile after Close", call: func() error {
			return closed.Reconcile(ctx, "req-2", []bucket.Delta{{Key: "k", Limit: guardLimit, Units: 1}})
		}, op: "reconcile", subject: "req-2", sentinel: bucket.ErrClosed, text: `bucket: reconcile "req-2": reconciler closed`},
		{name: "flush after Close", call: func() error { return closed.Flush(ctx) },
			op: "flush", sentinel: bucket.ErrClosed, text: `bucket: flush: reconciler closed`},
	} {
		err := tc.call()
		var se *bucket.StoreError
		if !errors.As(err, &se) {
			t.Errorf("%s: %v (%T) is no StoreError", tc.name, err, err)
			continue
		}
		if se.Op != tc.op || se.Subject != tc.subject {
			t.Errorf("%s: Op %q Subject %q, want %q %q", tc.name, se.Op, se.Subject, tc.op, tc.subject)
		}
		if !errors.Is(err, tc.sentinel) {
			t.Errorf("%s: %v does not wrap %v", tc.name, err, tc.sentinel)
		}
		if tc.text != "" && err.Error() != tc.text {
			t.Errorf("%s: %q, want %q", tc.name, err.Error(), tc.text)
		}
	}

	// Guarded names a store's failure from its fields, whatever its text
	// holds: a subject with quotes and ": " in it, a cause that itself
	// begins with the operation's name.
	cause := &bucket.StoreError{Op: "take", Subject: `k": take "x`, Err: errors.New(`take "y": refused`)}
	g := bucket.NewGuarded(failingStore{cause}, bucket.GuardOptions{MinCalls: 100, OpenFor: time.Hour, Timeout: time.Hour, ReconcileTimeout: time.Hour})
	_, err := g.Take(ctx, "", item("k", 1))
	if want := `bucket: take "k\": take \"x": store unavailable: take "y": refused`; err == nil || err.Error() != want {
		t.Errorf("guarded: %v\nwant %s", err, want)
	}
	var se *bucket.StoreError
	if !errors.As(err, &se) || se != cause || !errors.Is(err, bucket.ErrUnavailable) {
		t.Errorf("guarded: %v does not wrap ErrUnavailable and the store's StoreError", err)
	}
}
