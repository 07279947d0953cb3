package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Errors a Store returns. Callers turn them into metav1.Status errors.
var (
	ErrNotFound = errors.New("key not found")
	ErrExists   = errors.New("key exists")
	// ErrConflict: the key's mod revision is not the expected one.
	ErrConflict = errors.New("revision conflict")
	// ErrUnknownOutcome: a try of a write got no answer, and the key
	// changed since in a way that does not tell whether that try applied
	// (another write may have followed it): neither success nor a
	// refusal can be answered.
	ErrUnknownOutcome = errors.New("etcd did not answer a try of the write, and the key changed since: whether it was applied is unknown")
	// ErrCompacted: the requested revision has been compacted away.
	ErrCompacted = errors.New("revision compacted")
	// ErrFutureRevision: the requested revision is newer than the store's.
	// A Store's reads return it as a *TooLargeError, which names both
	// revisions and is ErrFutureRevision for errors.Is.
	ErrFutureRevision = errors.New("revision is in the future")
)

// KV is one stored value and its revisions.
type KV struct {
	Key            string
	Value          []byte
	ModRevision    int64
	CreateRevision int64
}

// Interface is what the resource engine and the controllers need of
// storage: reads, writes guarded by revisions, and the current revision.
// Store implements it over etcd; nothing outside this package sees etcd.
type Interface interface {
	// CurrentRevision returns the newest revision, from a linearizable
	// read (or, when this process is the store's only writer, the newest
	// it wrote or read: see Store.CurrentRevision).
	CurrentRevision(ctx context.Context) (int64, error)
	// OnlyWriter says whether this process makes every write the store
	// sees (the embedded etcd, which listens on no socket).
	OnlyWriter() bool
	// Get reads one key at revision rev (0: the newest) and returns the
	// revision of the read.
	Get(ctx context.Context, key string, rev int64) (*KV, int64, error)
	// List reads the keys in [start, end) at revision rev (0: the newest),
	// at most limit of them (0: all).
	List(ctx context.Context, start, end string, rev, limit int64) (*ListResult, error)
	// Create writes key only if it does not exist (else ErrExists) and
	// returns the new revision.
	Create(ctx context.Context, key string, value []byte, opts WriteOptions) (int64, error)
	// Update writes key only if its mod revision is expected; on
	// ErrConflict it returns the current value (ErrNotFound if gone).
	// A TTL counts from this write.
	Update(ctx context.Context, key string, value []byte, expected int64, opts WriteOptions) (int64, *KV, error)
	// Delete removes key only if its mod revision is expected, as Update.
	Delete(ctx context.Context, key string, expected int64) (int64, *KV, error)
}

// Store reads and writes keys in etcd.
type Store struct {
	cli   *clientv3.Client
	close func()
	// tf, when set, transforms values on their way to etcd and back
	// (encryption at rest).
	tf Transformer
	// leases are the etcd leases of keys written with a TTL, by TTL.
	leaseMu sync.Mutex
	leases  map[time.Duration]*lease
	// writes recognises this process's own writes (see WriteStamp).
	writes writes
	// historyReads bounds the reads of etcd's history for watches that
	// resume from before a cache's (see Cache.etcdEvents).
	historyReads chan struct{}
	// onlyWriter: no other process writes to this etcd (the embedded
	// one). newest is then the newest revision of any answer it gave.
	onlyWriter bool
	newest     atomic.Int64
	// stream is what the watch caches watch etcd on.
	stream watchStream
	// prefixes records the writes under each prefix, when this process
	// is the only writer.
	prefixes prefixWrites
}

// Transformer turns a value into what etcd stores for a key, and back:
// encryption at rest. Values it cannot read back fail the read.
type Transformer interface {
	ToStorage(ctx context.Context, key string, value []byte) ([]byte, error)
	FromStorage(ctx context.Context, key string, stored []byte) ([]byte, error)
}

// toStorage is what etcd stores for value at key.
func (s *Store) toStorage(ctx context.Context, key string, value []byte) ([]byte, error) {
	if s.tf == nil {
		return value, nil
	}
	return s.tf.ToStorage(ctx, key, value)
}

// fromStorage reads a stored value.
func (s *Store) fromStorage(ctx context.Context, key string, stored []byte) ([]byte, error) {
	if s.tf == nil {
		return stored, nil
	}
	v, err := s.tf.FromStorage(ctx, key, stored)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	return v, nil
}

// Close stops what Open started (nothing for a Store made by New).
func (s *Store) Close() {
	if s.close != nil {
		s.close()
	}
}

var _ Interface = (*Store)(nil)

// New returns a Store over an etcd client.
func New(cli *clientv3.Client) *Store {
	return &Store{cli: cli, stream: watchStream{cli: cli}, historyReads: make(chan struct{}, historyReaders)}
}

// kvFrom is a stored key and its value as the store's users see it.
func (s *Store) kvFrom(ctx context.Context, kv *mvccpb.KeyValue) (*KV, error) {
	v, err := s.fromStorage(ctx, string(kv.Key), kv.Value)
	if err != nil {
		return nil, err
	}
	return &KV{Key: string(kv.Key), Value: v, ModRevision: kv.ModRevision, CreateRevision: kv.CreateRevision}, nil
}

func interpret(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, rpctypes.ErrCompacted):
		return ErrCompacted
	case errors.Is(err, rpctypes.ErrFutureRev):
		return ErrFutureRevision
	}
	// The in-process client returns the server's errors untranslated.
	msg := err.Error()
	switch {
	case strings.Contains(msg, "required revision has been compacted"):
		return ErrCompacted
	case strings.Contains(msg, "required revision is a future revision"):
		return ErrFutureRevision
	}
	return err
}

// CurrentRevision returns the newest revision of the store, from a
// linearizable read. When this process is the store's only writer, it is
// the newest revision of any answer etcd gave it, known without asking:
// every write made before the call has its revision in it. (etcd's own
// deletes of keys whose lease expired are not: a read may see an Event
// a moment past its TTL, as no client can tell that moment exactly.)
func (s *Store) CurrentRevision(ctx context.Context) (int64, error) {
	if s.onlyWriter {
		if rev := s.newest.Load(); rev > 0 {
			return rev, nil
		}
	}
	resp, err := s.get(ctx, "compact_rev_key", clientv3.WithCountOnly())
	if err != nil {
		return 0, err
	}
	return resp.Header.Revision, nil
}

// future names the revisions of a read at a revision etcd has not reached
// (kube-apiserver's "Too large resource version: 100, current: 6").
func (s *Store) future(ctx context.Context, rev int64, err error) error {
	if !errors.Is(err, ErrFutureRevision) {
		return err
	}
	cur, cerr := s.CurrentRevision(ctx)
	if cerr != nil {
		return err
	}
	return &TooLargeError{Requested: rev, Current: cur}
}

// Healthy checks that etcd answers a linearizable read: a few tries of
// a second each, so that one member that does not answer (frozen, cut
// off) is not taken for the cluster.
func (s *Store) Healthy(ctx context.Context) error {
	var err error
	for i := 0; i < 3 && ctx.Err() == nil; i++ {
		actx, cancel := context.WithTimeout(ctx, time.Second)
		_, err = s.cli.Get(actx, "compact_rev_key", clientv3.WithCountOnly())
		cancel()
		if err == nil {
			return nil
		}
	}
	return interpret(err)
}

// Get reads one key at revision rev (0: the newest).
func (s *Store) Get(ctx context.Context, key string, rev int64) (*KV, int64, error) {
	opts := []clientv3.OpOption{}
	if rev > 0 {
		opts = append(opts, clientv3.WithRev(rev))
	}
	resp, err := s.get(ctx, key, opts...)
	if err != nil {
		return nil, 0, s.future(ctx, rev, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, resp.Header.Revision, ErrNotFound
	}
	kv, err := s.kvFrom(ctx, resp.Kvs[0])
	if err != nil {
		return nil, 0, err
	}
	return kv, resp.Header.Revision, nil
}

// OnlyWriter implements Interface.
func (s *Store) OnlyWriter() bool { return s.onlyWriter }

// saw records the revision of an answer of etcd's.
func (s *Store) saw(rev int64) {
	for {
		cur := s.newest.Load()
		if rev <= cur || s.newest.CompareAndSwap(cur, rev) {
			return
		}
	}
}

// get is a read, tried again on another member when one does not answer.
func (s *Store) get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	var resp *clientv3.GetResponse
	err := s.attempts(ctx, func(ctx context.Context) (err error) {
		resp, err = s.cli.Get(ctx, key, opts...)
		return err
	})
	if err == nil {
		s.saw(resp.Header.Revision)
	}
	return resp, interpret(err)
}

// Create writes key only if it does not exist and returns the new revision.
func (s *Store) Create(ctx context.Context, key string, value []byte, opts WriteOptions) (_ int64, err error) {
	stored, err := s.toStorage(ctx, key, value)
	if err != nil {
		return 0, err
	}
	put, err := s.put(ctx, key, stored, opts.TTL)
	if err != nil {
		return 0, err
	}
	pw := s.writes.begin(key, value, opts.Stamp)
	s.prefixes.begin(key, opts.TTL > 0)
	var rev int64
	written := false
	defer func() { s.prefixes.end(key, rev, written, err != nil && rev == 0 && !errors.Is(err, ErrExists)) }()
	var resp *clientv3.TxnResponse
	for i := 0; ; i++ {
		actx, cancel := context.WithTimeout(ctx, attemptTimeout)
		resp, err = s.cli.Txn(actx).
			If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
			Then(put).
			Else(clientv3.OpGet(key)).
			Commit()
		cancel()
		if err == nil || ctx.Err() != nil || !retryable(err) {
			break
		}
		if !unapplied(err) {
			// The try may have been applied, or may yet be. Sent again,
			// it would create the object a second time if someone deleted
			// it meanwhile (an update or a delete is guarded by a revision
			// no write reuses; a create is not): only a read may tell that
			// it was.
			if kv, _, gerr := s.Get(ctx, key, 0); gerr == nil && bytes.Equal(kv.Value, value) {
				rev, written = kv.ModRevision, true
				return rev, nil
			}
			break
		}
		if i+1 == maxAttempts {
			break
		}
	}
	if err != nil {
		// The write may have happened, or not: its record waits in case
		// it did (and expires otherwise).
		return 0, interpret(err)
	}
	s.saw(resp.Header.Revision)
	if !resp.Succeeded {
		s.writes.abort(key, pw)
		err = ErrExists
		return 0, err
	}
	rev, written = resp.Header.Revision, true
	return rev, nil
}

// put is the put of a stored value, on a lease when it has a TTL.
func (s *Store) put(ctx context.Context, key string, stored []byte, ttl time.Duration) (clientv3.Op, error) {
	if ttl <= 0 {
		return clientv3.OpPut(key, string(stored)), nil
	}
	id, err := s.lease(ctx, ttl)
	if err != nil {
		return clientv3.Op{}, err
	}
	return clientv3.OpPut(key, string(stored), clientv3.WithLease(id)), nil
}

// Update writes key only if its mod revision is expected. On ErrConflict it
// returns the current value (nil if the key is gone, with ErrNotFound).
func (s *Store) Update(ctx context.Context, key string, value []byte, expected int64, opts WriteOptions) (int64, *KV, error) {
	stored, err := s.toStorage(ctx, key, value)
	if err != nil {
		return 0, nil, err
	}
	put, err := s.put(ctx, key, stored, opts.TTL)
	if err != nil {
		return 0, nil, err
	}
	pw := s.writes.begin(key, value, opts.Stamp)
	s.prefixes.begin(key, opts.TTL > 0)
	rev, cur, err := s.guarded(ctx, key, expected, put, func(cur *mvccpb.KeyValue) bool {
		return cur != nil && cur.ModRevision > expected && bytes.Equal(cur.Value, stored)
	})
	refused := errors.Is(err, ErrConflict) || errors.Is(err, ErrNotFound)
	s.prefixes.end(key, rev, err == nil, err != nil && !refused)
	if refused {
		s.writes.abort(key, pw)
	}
	return rev, cur, err
}

// Delete removes key only if its mod revision is expected. It returns the
// revision of the deletion; on ErrConflict the current value.
func (s *Store) Delete(ctx context.Context, key string, expected int64) (int64, *KV, error) {
	s.prefixes.begin(key, false)
	// A delete leaves nothing to tell its own unanswered try from another
	// client's delete by.
	rev, cur, err := s.guarded(ctx, key, expected, clientv3.OpDelete(key), func(*mvccpb.KeyValue) bool { return false })
	refused := errors.Is(err, ErrConflict) || errors.Is(err, ErrNotFound)
	s.prefixes.end(key, rev, err == nil, err != nil && !refused)
	return rev, cur, err
}

// guarded runs op on key in a transaction that succeeds only if the key's
// mod revision is expected. When a try got no answer and a later one finds
// the guard failed, done says from the key's state (nil: absent) whether
// it is what the unanswered try stored; if not, the outcome is unknown
// (ErrUnknownOutcome). A try refused before it was proposed (unapplied)
// leaves the answer of the next one as it is.
func (s *Store) guarded(ctx context.Context, key string, expected int64, op clientv3.Op, done func(cur *mvccpb.KeyValue) bool) (int64, *KV, error) {
	lost := false // a try got no answer: it may have been applied
	var resp *clientv3.TxnResponse
	err := s.attempts(ctx, func(ctx context.Context) (err error) {
		resp, err = s.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(key), "=", expected)).
			Then(op).
			Else(clientv3.OpGet(key)).
			Commit()
		lost = lost || err != nil && !unapplied(err)
		return err
	})
	if err != nil {
		return 0, nil, interpret(err)
	}
	s.saw(resp.Header.Revision)
	if !resp.Succeeded {
		var raw *mvccpb.KeyValue
		if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
			raw = kvs[0]
		}
		if lost {
			// An earlier try got no answer. What is stored may be its
			// value: it was applied. Otherwise it may have been applied
			// and the key changed since by another write, or not have
			// been: a conflict or a not-found would be a guess.
			if done(raw) {
				return raw.ModRevision, nil, nil
			}
			return 0, nil, ErrUnknownOutcome
		}
		if raw == nil {
			return 0, nil, ErrNotFound
		}
		cur, err := s.kvFrom(ctx, raw)
		if err != nil {
			return 0, nil, err
		}
		return 0, cur, ErrConflict
	}
	return resp.Header.Revision, nil, nil
}

// Requests to etcd are bounded: a member that does not answer in time
// (frozen, cut off, without a leader) is given up on and the request sent
// again, which the client sends to the next member. Update and Delete are
// guarded by a revision no write reuses, so a try that got no answer cannot
// apply twice; an update whose value is what is stored was applied, and
// otherwise the outcome is unknown (ErrUnknownOutcome). Create is sent
// again only after an error that says it was not proposed (see Create).
const (
	attemptTimeout = 5 * time.Second
	maxAttempts    = 4
)

// attempts runs f until it succeeds, fails for good, or ctx ends.
func (s *Store) attempts(ctx context.Context, f func(ctx context.Context) error) error {
	var err error
	for i := 0; i < maxAttempts; i++ {
		actx, cancel := context.WithTimeout(ctx, attemptTimeout)
		err = f(actx)
		cancel()
		if err == nil || ctx.Err() != nil || !retryable(err) {
			return err
		}
	}
	return err
}

// retryable says whether an etcd error leaves the request's outcome open
// (no answer, no leader, a connection lost) rather than refused.
func retryable(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded:
		return true
	}
	for _, e := range []error{rpctypes.ErrTimeout, rpctypes.ErrTimeoutDueToLeaderFail, rpctypes.ErrTimeoutDueToConnectionLost,
		rpctypes.ErrLeaderChanged, rpctypes.ErrNoLeader, rpctypes.ErrNotCapable, rpctypes.ErrTooManyRequests} {
		if errors.Is(err, e) || err.Error() == e.Error() {
			return true
		}
	}
	return false
}

// unapplied says whether a retryable error says the write was refused
// before etcd proposed it (no leader, overloaded): sent again, it cannot
// apply twice.
func unapplied(err error) bool {
	for _, e := range []error{rpctypes.ErrNoLeader, rpctypes.ErrNotCapable, rpctypes.ErrTooManyRequests} {
		if errors.Is(err, e) || err.Error() == e.Error() {
			return true
		}
	}
	return false
}

// ListResult is one page of a range read.
type ListResult struct {
	KVs []*KV
	// Revision the page was read at.
	Revision int64
	// More is true when keys after the last one exist in the range.
	More bool
	// Remaining counts the keys after this page.
	Remaining int64
}

// List reads the keys in [start, end) at revision rev (0: the newest), at
// most limit of them (0: all).
func (s *Store) List(ctx context.Context, start, end string, rev, limit int64) (*ListResult, error) {
	out, err := s.listRaw(ctx, start, end, rev, limit)
	if err != nil {
		return nil, err
	}
	for _, kv := range out.KVs {
		if kv.Value, err = s.fromStorage(ctx, kv.Key, kv.Value); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// listRaw is List with the values as etcd stores them.
func (s *Store) listRaw(ctx context.Context, start, end string, rev, limit int64) (*ListResult, error) {
	opts := []clientv3.OpOption{clientv3.WithRange(end)}
	if rev > 0 {
		opts = append(opts, clientv3.WithRev(rev))
	}
	if limit > 0 {
		opts = append(opts, clientv3.WithLimit(limit))
	}
	resp, err := s.get(ctx, start, opts...)
	if err != nil {
		return nil, s.future(ctx, rev, err)
	}
	out := &ListResult{Revision: resp.Header.Revision, More: resp.More, KVs: make([]*KV, len(resp.Kvs))}
	for i, kv := range resp.Kvs {
		out.KVs[i] = &KV{Key: string(kv.Key), Value: kv.Value, ModRevision: kv.ModRevision, CreateRevision: kv.CreateRevision}
	}
	out.Remaining = resp.Count - int64(len(resp.Kvs))
	if rev > 0 {
		out.Revision = rev
	}
	return out, nil
}

// PrefixEnd returns the first key after every key that starts with prefix.
func PrefixEnd(prefix string) string { return clientv3.GetPrefixRangeEnd(prefix) }
