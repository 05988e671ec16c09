package keystore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Sentinel errors of Registry's methods; the admin API answers them with
// 404, 409, 409 and 409.
var (
	ErrNotFound = errors.New("keystore: no such key")
	ErrRevoked  = errors.New("keystore: the key is already revoked")
	ErrRotated  = errors.New("keystore: the key was already rotated")
	ErrFull     = errors.New("keystore: the registry holds key_store.max_keys keys")
)

// Actor is who asked for a change, as the audit stream records it.
type Actor struct {
	// Name is the caller's own name (the X-Llmguard-Actor header,
	// `llmguard keys --actor`), else how it authenticated.
	Name string
	// Auth is how the caller was let in: "token" (admin_token_env) or
	// "loopback" (no token configured).
	Auth string
}

// AuditEntry is one change in the audit stream: who, what, when; never a
// secret.
type AuditEntry struct {
	// StreamID is the entry's Redis stream id.
	StreamID string    `json:"stream_id"`
	At       time.Time `json:"at"`
	Actor    string    `json:"actor"`
	Auth     string    `json:"auth"`
	// Action is create, revoke or rotate.
	Action string `json:"action"`
	KeyID  string `json:"key_id"`
	Tenant string `json:"tenant"`
	User   string `json:"user"`
	Plan   string `json:"plan,omitempty"`
	// ExpiresAt is the key's expiry after the change (RFC 3339), "" for
	// none.
	ExpiresAt string `json:"expires_at,omitempty"`
	// Detail says more: a rotation's other key and grace.
	Detail string `json:"detail,omitempty"`
}

// RegistryOptions configures a Registry.
type RegistryOptions struct {
	// Client is the store's Redis (*redis.Client or *redis.ClusterClient).
	Client redis.UniversalClient
	// AuditMaxLen bounds the audit stream, in entries (XADD MAXLEN ~).
	// Zero: 100000.
	AuditMaxLen int64
	// MaxKeys bounds the records the registry holds. Zero: 100000.
	MaxKeys int
}

// Registry changes and reads the stored keys in Redis. Every change is
// one MULTI/EXEC under WATCH of the registry and its revision: the
// record, the revision, an audit entry and the notification together.
// Safe for concurrent use; each method takes its deadline from ctx.
type Registry struct {
	rdb         redis.UniversalClient
	auditMaxLen int64
	maxKeys     int
	// mu serialises this process's changes: every change WATCHes the same
	// two keys, so concurrent ones of one node would only make each
	// other's EXEC fail (16 parallel creates on one node ran out of
	// attempts and answered 503 about 0.5% of the time).
	mu sync.Mutex
}

// NewRegistry returns a Registry on o.Client.
func NewRegistry(o RegistryOptions) *Registry {
	r := &Registry{rdb: o.Client, auditMaxLen: o.AuditMaxLen, maxKeys: o.MaxKeys}
	if r.auditMaxLen <= 0 {
		r.auditMaxLen = 100000
	}
	if r.maxKeys <= 0 {
		r.maxKeys = 100000
	}
	return r
}

// maxTxAttempts bounds the optimistic retries of a change whose WATCH saw
// another node's change land first (one node's changes take turns, under
// Registry.mu). Before attempt n a change waits a random time up to
// n × 5 ms, so that nodes that keep colliding spread out.
const maxTxAttempts = 32

// Create makes a new key for s at instant now: a secret from crypto/rand
// (returned here, and never stored), and its record. Errors: ErrFull, or
// the store's.
func (r *Registry) Create(ctx context.Context, s Spec, by Actor, now time.Time) (secret string, rec Record, err error) {
	for range 3 {
		secret = NewSecret()
		rec = newRecord(secret, s, by, now)
		err = r.change(ctx, func(tx *redis.Tx, rev int64) ([]Record, *AuditEntry, error) {
			n, err := tx.HLen(ctx, RegistryKey).Result()
			if err != nil {
				return nil, nil, err
			}
			if n >= int64(r.maxKeys) {
				return nil, nil, ErrFull
			}
			if ok, err := tx.HExists(ctx, RegistryKey, rec.ID).Result(); err != nil {
				return nil, nil, err
			} else if ok {
				return nil, nil, errIDTaken
			}
			rec.Rev = rev
			return []Record{rec}, audit(by, "create", &rec, now, ""), nil
		})
		if !errors.Is(err, errIDTaken) {
			break
		}
	}
	if err != nil {
		return "", Record{}, err
	}
	return secret, rec, nil
}

// errIDTaken: the new secret's id (64 bits of its hash) is another key's;
// Create draws again.
var errIDTaken = errors.New("keystore: key id taken")

func newRecord(secret string, s Spec, by Actor, now time.Time) Record {
	sum := sha256.Sum256([]byte(secret))
	h := hex.EncodeToString(sum[:])
	rec := Record{ID: h[:16], SHA256: h, User: s.User, Tenant: s.Tenant, Plan: s.Plan,
		CreatedAt: now.UTC(), CreatedBy: by.Name, ExpiresAt: s.ExpiresAt}
	if rec.User == "" {
		rec.User = rec.ID // as for the file's keys
	}
	return rec
}

// Revoke revokes the key id at instant now, and with it every key it
// replaced (rotated_from, followed back) that still works at now, in its
// rotation's grace period: grace lets callers move to the successor, and a
// revoked successor leaves them nothing to move to, while the old secret
// would go on working until its grace ended (trial11). ended lists those
// predecessors as written (revoked at now by the same actor); the audit
// entry names them. Only links created within MaxGrace of now are followed
// (an older link's predecessor's grace has ended), at most maxRevokeChain.
// Errors: ErrNotFound, ErrRevoked, or the store's.
func (r *Registry) Revoke(ctx context.Context, id string, by Actor, now time.Time) (rec Record, ended []Record, err error) {
	err = r.change(ctx, func(tx *redis.Tx, rev int64) ([]Record, *AuditEntry, error) {
		cur, err := r.get(ctx, tx, id)
		if err != nil {
			return nil, nil, err
		}
		if !cur.RevokedAt.IsZero() {
			return nil, nil, ErrRevoked
		}
		cur.RevokedAt, cur.RevokedBy, cur.Rev = now.UTC(), by.Name, rev
		rec, ended = cur, nil
		detail := ""
		for link, from := 0, cur; from.RotatedFrom != "" && link < maxRevokeChain && !now.After(from.CreatedAt.Add(MaxGrace)); link++ {
			prev, err := r.get(ctx, tx, from.RotatedFrom)
			if errors.Is(err, ErrNotFound) {
				break
			}
			if err != nil {
				return nil, nil, err
			}
			if prev.Status(now) == StatusActive {
				prev.RevokedAt, prev.RevokedBy, prev.Rev = now.UTC(), by.Name, rev
				ended = append(ended, prev)
				detail += ", and " + prev.ID + " (its predecessor, in grace until " + prev.ExpiresAt.Format(time.RFC3339) + ")"
			}
			from = prev
		}
		if detail != "" {
			detail = "revoked" + detail
		}
		return append([]Record{cur}, ended...), audit(by, "revoke", &cur, now, detail), nil
	})
	if err != nil {
		return Record{}, nil, err
	}
	return rec, ended, nil
}

// maxRevokeChain bounds how many predecessors Revoke reads back along
// rotated_from: a key rotated daily with the longest grace (MaxGrace, 30
// days) has 30 predecessors still working.
const maxRevokeChain = 64

// Rotate replaces the key id at instant now with a new key of the same
// user, tenant, plan and expiry, returned with its secret. The old key is
// revoked at once when grace is zero; otherwise it keeps working until
// now + grace (cut to the second), or its own expiry if sooner. Errors:
// ErrNotFound, ErrRevoked (a revoked key is not rotated), ErrRotated (a
// key is rotated once: its successor is the one to rotate; concurrent
// rotations of one key leave one successor, as the registry's WATCH
// serialises them), ErrFull, or the store's.
func (r *Registry) Rotate(ctx context.Context, id string, grace time.Duration, by Actor, now time.Time) (secret string, next, old Record, err error) {
	for range 3 {
		err = r.change(ctx, func(tx *redis.Tx, rev int64) ([]Record, *AuditEntry, error) {
			prev, err := r.get(ctx, tx, id)
			if err != nil {
				return nil, nil, err
			}
			if !prev.RevokedAt.IsZero() {
				return nil, nil, ErrRevoked
			}
			if prev.RotatedTo != "" {
				return nil, nil, ErrRotated
			}
			if n, err := tx.HLen(ctx, RegistryKey).Result(); err != nil {
				return nil, nil, err
			} else if n >= int64(r.maxKeys) {
				return nil, nil, ErrFull
			}
			secret = NewSecret()
			next = newRecord(secret, Spec{User: prev.User, Tenant: prev.Tenant, Plan: prev.Plan, ExpiresAt: prev.ExpiresAt}, by, now)
			if ok, err := tx.HExists(ctx, RegistryKey, next.ID).Result(); err != nil {
				return nil, nil, err
			} else if ok {
				return nil, nil, errIDTaken
			}
			next.RotatedFrom, next.Rev = prev.ID, rev
			prev.RotatedTo, prev.Rev = next.ID, rev
			detail := "replaced by " + next.ID
			if grace == 0 {
				prev.RevokedAt, prev.RevokedBy = now.UTC(), by.Name
				detail += ", revoked at once"
			} else {
				until := now.Add(grace).UTC().Truncate(time.Second)
				if prev.ExpiresAt.IsZero() || until.Before(prev.ExpiresAt) {
					prev.ExpiresAt = until
				}
				detail += fmt.Sprintf(", works until %s (grace %v)", prev.ExpiresAt.Format(time.RFC3339), grace)
			}
			old = prev
			return []Record{prev, next}, audit(by, "rotate", &prev, now, detail), nil
		})
		if !errors.Is(err, errIDTaken) {
			break
		}
	}
	if err != nil {
		return "", Record{}, Record{}, err
	}
	return secret, next, old, nil
}

// Get reads the key id. Errors: ErrNotFound, or the store's.
func (r *Registry) Get(ctx context.Context, id string) (Record, error) {
	return r.get(ctx, r.rdb, id)
}

func (r *Registry) get(ctx context.Context, c redis.Cmdable, id string) (Record, error) {
	if !ValidID(id) {
		return Record{}, ErrNotFound
	}
	b, err := c.HGet(ctx, RegistryKey, id).Bytes()
	if errors.Is(err, redis.Nil) {
		return Record{}, ErrNotFound
	}
	if err != nil {
		return Record{}, fmt.Errorf("keystore: get %s: %w", id, err)
	}
	rec, err := ParseRecord(b)
	if err == nil && rec.ID != id {
		err = fmt.Errorf("keystore: registry field %s holds key %s", id, rec.ID)
	}
	return rec, err
}

// Snapshot is the whole registry as one read of it gave it.
type Snapshot struct {
	// Records are the readable records, at most MaxKeys.
	Records []Record
	// Rev is the registry's revision read before the records: a record
	// with a higher Rev changed during the read.
	Rev int64
	// Bad counts the fields that did not parse (skipped); Truncated is
	// true when the registry held more than MaxKeys records.
	Bad       int
	Truncated bool
	// Since is the reading cache's Mark taken before the read began
	// (Cache.Replace); List leaves it zero, the Syncer sets it.
	Since uint64
}

// List reads every record, with HSCAN in pages of 1000, at most MaxKeys of
// them. Errors: the store's.
func (r *Registry) List(ctx context.Context) (Snapshot, error) {
	var s Snapshot
	rev, err := r.rdb.Get(ctx, RevKey).Int64()
	if err != nil && !errors.Is(err, redis.Nil) {
		return s, fmt.Errorf("keystore: read the revision: %w", err)
	}
	s.Rev = rev
	var cursor uint64
	for {
		kv, next, err := scanBounded(ctx, r.rdb, cursor)
		if err != nil {
			return Snapshot{}, fmt.Errorf("keystore: scan the registry: %w", err)
		}
		for i := 0; i+1 < len(kv); i += 2 {
			rec, err := ParseRecord([]byte(kv[i+1]))
			if err != nil || rec.ID != kv[i] {
				s.Bad++
				continue
			}
			if len(s.Records) >= r.maxKeys {
				s.Truncated = true
				return s, nil
			}
			s.Records = append(s.Records, rec)
		}
		if cursor = next; cursor == 0 {
			return s, nil
		}
	}
}

// scanPage is how many registry fields one scan call asks Redis for.
const scanPage = 1000

// scanScript is one HSCAN page of the registry in which a value longer
// than ARGV[3] bytes (MaxRecordBytes) is replaced by "" before it leaves
// Redis: a value written by hand (hundreds of MB) must not be read whole by
// every node at every resync. Its reply is HSCAN's: {cursor, {field,
// value, …}}.
var scanScript = redis.NewScript(`
local r = redis.call('HSCAN', KEYS[1], ARGV[1], 'COUNT', ARGV[2])
local kv, max = r[2], tonumber(ARGV[3])
for i = 2, #kv, 2 do
  if #kv[i] > max then kv[i] = '' end
end
return r`)

// scanBounded is one page of the registry from cursor: fields and values
// (each value at most MaxRecordBytes, an oversized one ""), and the next
// cursor (0: done). Errors: the store's, or a reply not shaped as HSCAN's.
func scanBounded(ctx context.Context, rdb redis.UniversalClient, cursor uint64) (kv []string, next uint64, err error) {
	res, err := scanScript.Run(ctx, rdb, []string{RegistryKey}, strconv.FormatUint(cursor, 10), scanPage, MaxRecordBytes).Slice()
	if err != nil {
		return nil, 0, err
	}
	if len(res) != 2 {
		return nil, 0, fmt.Errorf("scan reply of %d parts", len(res))
	}
	c, _ := res[0].(string)
	if next, err = strconv.ParseUint(c, 10, 64); err != nil {
		return nil, 0, fmt.Errorf("scan cursor %q", c)
	}
	items, _ := res[1].([]any)
	kv = make([]string, 0, len(items))
	for _, it := range items {
		v, _ := it.(string)
		kv = append(kv, v)
	}
	return kv, next, nil
}

// Audit reads the latest count entries of the audit stream, newest first
// (count clamped to 1..1000). Errors: the store's.
func (r *Registry) Audit(ctx context.Context, count int64) ([]AuditEntry, error) {
	count = min(max(count, 1), 1000)
	msgs, err := r.rdb.XRevRangeN(ctx, AuditKey, "+", "-", count).Result()
	if err != nil {
		return nil, fmt.Errorf("keystore: read the audit stream: %w", err)
	}
	out := make([]AuditEntry, 0, len(msgs))
	for _, m := range msgs {
		s := func(k string) string { v, _ := m.Values[k].(string); return v }
		at, _ := time.Parse(time.RFC3339Nano, s("at"))
		out = append(out, AuditEntry{StreamID: m.ID, At: at, Actor: s("actor"), Auth: s("auth"), Action: s("action"),
			KeyID: s("key_id"), Tenant: s("tenant"), User: s("user"), Plan: s("plan"), ExpiresAt: s("expires_at"), Detail: s("detail")})
	}
	return out, nil
}

func audit(by Actor, action string, rec *Record, now time.Time, detail string) *AuditEntry {
	e := &AuditEntry{At: now.UTC(), Actor: by.Name, Auth: by.Auth, Action: action, KeyID: rec.ID,
		Tenant: rec.Tenant, User: rec.User, Plan: rec.Plan, Detail: detail}
	if !rec.ExpiresAt.IsZero() {
		e.ExpiresAt = rec.ExpiresAt.Format(time.RFC3339)
	}
	return e
}

// change runs one optimistic transaction: under WATCH of the registry and
// its revision, plan reads what it needs and returns the records to write
// (each already carrying rev, the new revision) and the audit entry; then
// MULTI writes them, the revision, the entry and one notification per
// record, and EXEC applies all or nothing. A concurrent change makes EXEC
// fail and the whole is tried again, up to maxTxAttempts times. Errors:
// plan's, or the store's.
func (r *Registry) change(ctx context.Context, plan func(tx *redis.Tx, rev int64) ([]Record, *AuditEntry, error)) error {
	var recs []Record
	fn := func(tx *redis.Tx) error {
		cur, err := tx.Get(ctx, RevKey).Int64()
		if err != nil && !errors.Is(err, redis.Nil) {
			return err
		}
		if cur < 0 || cur == math.MaxInt64 {
			// Written by hand or by a hostile Redis client: a record made
			// at such a revision would be refused by every node's parser.
			return fmt.Errorf("the registry's revision %s is %d: set it to the highest rev of its records", RevKey, cur)
		}
		rev := cur + 1
		var entry *AuditEntry
		recs, entry, err = plan(tx, rev)
		if err != nil {
			return err
		}
		_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			for i := range recs {
				b, _ := json.Marshal(&recs[i])
				p.HSet(ctx, RegistryKey, recs[i].ID, b)
			}
			p.Set(ctx, RevKey, strconv.FormatInt(rev, 10), 0)
			p.XAdd(ctx, &redis.XAddArgs{Stream: AuditKey, MaxLen: r.auditMaxLen, Approx: true, Values: []string{
				"at", entry.At.Format(time.RFC3339Nano), "actor", entry.Actor, "auth", entry.Auth, "action", entry.Action,
				"key_id", entry.KeyID, "tenant", entry.Tenant, "user", entry.User, "plan", entry.Plan,
				"expires_at", entry.ExpiresAt, "detail", entry.Detail}})
			for i := range recs {
				b, _ := json.Marshal(&recs[i])
				p.Publish(ctx, Channel, b)
			}
			return nil
		})
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for attempt := range maxTxAttempts {
		if attempt > 0 {
			// Another node's change won: wait a little, at random, so
			// that nodes changing at once do not collide again in step.
			t := time.NewTimer(time.Duration(rand.Int64N(int64(attempt)*int64(5*time.Millisecond)) + 1))
			select {
			case <-ctx.Done():
				t.Stop()
				return fmt.Errorf("keystore: %w", ctx.Err())
			case <-t.C:
			}
		}
		err := r.rdb.Watch(ctx, fn, RegistryKey, RevKey)
		if !errors.Is(err, redis.TxFailedErr) {
			if err != nil && !isSentinel(err) {
				return fmt.Errorf("keystore: %w", err)
			}
			return err
		}
	}
	return fmt.Errorf("keystore: %d concurrent changes in a row; try again", maxTxAttempts)
}

func isSentinel(err error) bool {
	return errors.Is(err, ErrNotFound) || errors.Is(err, ErrRevoked) || errors.Is(err, ErrRotated) || errors.Is(err, ErrFull) || errors.Is(err, errIDTaken)
}
