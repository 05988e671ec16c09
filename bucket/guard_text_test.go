package bucket_test

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/llmguard/llmguard/bucket"
)

// failingStore fails every call with err.
type failingStore struct{ err error }

func (f failingStore) Take(context.Context, string, []bucket.Item) (bucket.Decision, error) {
	return bucket.Decision{}, f.err
}
func (f failingStore) Reconcile(context.Context, string, []bucket.Delta) error { return f.err }
func (f failingStore) Void(context.Context, string, []bucket.Item) error       { return f.err }

// A Guarded store's error names the operation once: the stores' own errors
// (StoreError, as the fakes here return them) read "bucket: take \"key\": …", which Guarded's prefix used to repeat
// ("bucket: take: store unavailable: bucket: take \"k\": dial …", the text
// /admin/usage showed when the quota store was down). Each error still
// wraps ErrUnavailable and the cause (and ErrNotSent once the breaker
// rejects the call).
func TestGuardedErrorNamesTheOperationOnce(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name, want string
		cause      error
		reconcile  bool
	}{
		{name: "a Redis take", cause: &bucket.StoreError{Op: "take", Subject: "llmguard:{acme}:q:acme", Err: errRefused},
			want: `bucket: take "llmguard:{acme}:q:acme": store unavailable: dial tcp 127.0.0.1:1: connect: connection refused`},
		{name: "a Memory take", cause: &bucket.StoreError{Op: "take", Err: errRefused},
			want: `bucket: take: store unavailable: dial tcp 127.0.0.1:1: connect: connection refused`},
		{name: "a cause of another package", cause: errRefused,
			want: `bucket: take: store unavailable: dial tcp 127.0.0.1:1: connect: connection refused`},
		{name: "a reconcile", reconcile: true, cause: &bucket.StoreError{Op: "reconcile", Subject: "req-1", Err: errRefused},
			want: `bucket: reconcile "req-1": store unavailable: dial tcp 127.0.0.1:1: connect: connection refused`},
		{name: "a void, counted as a reconcile", reconcile: true, cause: &bucket.StoreError{Op: "void", Subject: "req-1", Err: errRefused},
			want: `bucket: reconcile: store unavailable: void "req-1": dial tcp 127.0.0.1:1: connect: connection refused`},
	} {
		g := bucket.NewGuarded(failingStore{tc.cause}, bucket.GuardOptions{MinCalls: 100, OpenFor: time.Hour, Timeout: time.Hour, ReconcileTimeout: time.Hour})
		var err error
		if tc.reconcile {
			err = g.Reconcile(ctx, "req-1", []bucket.Delta{{Key: "k", Limit: guardLimit, Units: 1}})
		} else {
			_, err = g.Take(ctx, "", item("k", 1))
		}
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s: %v\nwant %s", tc.name, err, tc.want)
		}
		if !errors.Is(err, bucket.ErrUnavailable) || !errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, bucket.ErrNotSent) {
			t.Errorf("%s: %v does not wrap ErrUnavailable and the cause only", tc.name, err)
		}
	}

	// Once open, the breaker rejects a call: the last failure is quoted
	// without its own "bucket: " (its key is another call's).
	g := bucket.NewGuarded(failingStore{&bucket.StoreError{Op: "take", Subject: "k1", Err: errRefused}},
		bucket.GuardOptions{MinCalls: 1, OpenFor: time.Hour, Timeout: time.Hour, ReconcileTimeout: time.Hour})
	g.Take(ctx, "", item("k1", 1))
	_, err := g.Take(ctx, "", item("k2", 1))
	want := `bucket: take: store unavailable: not sent to the store: breaker open (last failure: take "k1": dial tcp 127.0.0.1:1: connect: connection refused)`
	if err == nil || err.Error() != want {
		t.Errorf("rejected: %v\nwant %s", err, want)
	}
	if !errors.Is(err, bucket.ErrUnavailable) || !errors.Is(err, bucket.ErrNotSent) || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("rejected: %v does not wrap ErrUnavailable, ErrNotSent and the last failure", err)
	}
}
