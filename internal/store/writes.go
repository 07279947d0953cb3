package store

import (
	"bytes"
	"context"
	"reflect"
	"sync"
	"time"

	"github.com/crdserver/crdserver/internal/jsonraw"
)

// A value this process wrote through its own write path is recognised when
// the watch cache reads it back, so that the cache's users can tell it from
// a value written by anyone else (another replica, a tool writing to etcd
// straight, this process before a schema changed) and skip the work its
// write path already did.
//
// The link is exact, not a guess from revisions: a request announces the
// key it prepares a value for (PrepareWrite, with what it vouches for:
// WriteStamp), its own write of that key (the same request context, the
// same key) takes the announcement, and the value it writes waits, with
// the stamp, until the cache sees that very value at that key. Anything
// missing on the way (another context, another key, a value that differs,
// a write of another replica) only leaves the item without a stamp. A
// stamp names the schema revision the value was prepared under, so that a
// request still in flight on an older schema stamps what it writes with
// that older revision, which readers on the new one do not take as theirs.
// The request itself can also ask, for the answer it sends, whether an
// object is what it just wrote (WrittenBy).

// WriteStamp is what this process's own write path vouches for in a value
// it wrote.
type WriteStamp struct {
	// Epoch is the revision of the schema the value was prepared under.
	Epoch int64
	// Defaulted says the value was written with every default of the
	// version it is stored in applied.
	Defaulted bool
}

// Bounds of the records: beyond them a write simply goes without a stamp.
const (
	maxRequests = 4096
	maxPending  = 4096
	// pendingTTL: a written value not seen by a cache by then (its cache
	// reloaded meanwhile, say) is forgotten.
	pendingTTL = time.Minute
)

// writes holds, for one Store, the requests that announced writes and the
// written values no cache has seen yet.
type writes struct {
	mu       sync.Mutex
	requests map[context.Context]*requestWrites
	pending  map[string][]*pendingWrite
	nPend    int
}

// requestWrites is what one request announced and last wrote.
type requestWrites struct {
	prepared map[string]WriteStamp // by key
	last     *pendingWrite         // its latest stamped write, once done
	lastKey  string
	lastRev  int64
}

type pendingWrite struct {
	value    []byte
	stamp    WriteStamp
	deadline time.Time
}

// identifiable reports whether ctx can key a map: contexts are pointers in
// practice, but a context of another kind must cost nothing but the stamp.
func identifiable(ctx context.Context) bool {
	return ctx != nil && reflect.TypeOf(ctx).Comparable()
}

// PrepareWrite announces that the request of ctx prepares a value of key
// that it vouches for as stamp says. Its next write of key (Create or
// Update with the same ctx) carries the stamp to the cache. A context that
// never ends, or that cannot be told from another, announces nothing.
func (c *Cache) PrepareWrite(ctx context.Context, key string, stamp WriteStamp) {
	if c.store == nil || ctx.Done() == nil || !identifiable(ctx) {
		return
	}
	c.store.writes.prepare(ctx, key, stamp)
}

func (w *writes) prepare(ctx context.Context, key string, stamp WriteStamp) {
	w.mu.Lock()
	defer w.mu.Unlock()
	r := w.requests[ctx]
	if r == nil {
		if len(w.requests) >= maxRequests {
			return
		}
		if w.requests == nil {
			w.requests = map[context.Context]*requestWrites{}
		}
		r = &requestWrites{prepared: map[string]WriteStamp{}}
		w.requests[ctx] = r
		// The request's records go with it.
		context.AfterFunc(ctx, func() {
			w.mu.Lock()
			defer w.mu.Unlock()
			delete(w.requests, ctx)
		})
	}
	// Prepared again (a retried update): the newest counts.
	r.prepared[key] = stamp
}

// begin is called before ctx's write of value at key: it takes ctx's
// announcement for key, if any, and records the value with its stamp. It
// returns the record (nil: the write goes without a stamp), for done and
// abort.
func (w *writes) begin(ctx context.Context, key string, value []byte) *pendingWrite {
	if !identifiable(ctx) {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	r := w.requests[ctx]
	if r == nil {
		return nil
	}
	stamp, ok := r.prepared[key]
	if !ok {
		return nil
	}
	delete(r.prepared, key)
	now := time.Now()
	if w.nPend >= maxPending {
		w.expireLocked(now)
		if w.nPend >= maxPending {
			return nil
		}
	}
	if w.pending == nil {
		w.pending = map[string][]*pendingWrite{}
	}
	pw := &pendingWrite{value: value, stamp: stamp, deadline: now.Add(pendingTTL)}
	w.pending[key] = append(w.pending[key], pw)
	w.nPend++
	return pw
}

// done records that ctx's write of pw at key happened, at rev.
func (w *writes) done(ctx context.Context, key string, pw *pendingWrite, rev int64) {
	if pw == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if r := w.requests[ctx]; r != nil {
		r.last, r.lastKey, r.lastRev = pw, key, rev
	}
}

// abort forgets the record of a write that did not happen.
func (w *writes) abort(key string, pw *pendingWrite) {
	if pw == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.dropPendingLocked(key, pw)
}

func (w *writes) dropPendingLocked(key string, pw *pendingWrite) {
	l := w.pending[key]
	for i, x := range l {
		if x == pw {
			l = append(l[:i], l[i+1:]...)
			w.nPend--
			break
		}
	}
	if len(l) == 0 {
		delete(w.pending, key)
	} else {
		w.pending[key] = l
	}
}

func (w *writes) expireLocked(now time.Time) {
	for key, l := range w.pending {
		kept := l[:0]
		for _, pw := range l {
			if now.After(pw.deadline) {
				w.nPend--
				continue
			}
			kept = append(kept, pw)
		}
		if len(kept) == 0 {
			delete(w.pending, key)
		} else {
			w.pending[key] = kept
		}
	}
}

// claim is called when a cache reads value at key: the stamp of this
// process's write of that very value, if one is waiting.
func (w *writes) claim(key string, value []byte) *WriteStamp {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, pw := range w.pending[key] {
		if bytes.Equal(pw.value, value) {
			w.dropPendingLocked(key, pw)
			s := pw.stamp
			return &s
		}
	}
	return nil
}

// WrittenBy returns the stamp of what the request of ctx last wrote, if
// obj is exactly that (the value it wrote, with its resourceVersion rev
// set): the answer to a write need not be read as from storage. Nil
// otherwise.
func (c *Cache) WrittenBy(ctx context.Context, obj []byte, rev int64) *WriteStamp {
	if c.store == nil || !identifiable(ctx) {
		return nil
	}
	w := &c.store.writes
	w.mu.Lock()
	r := w.requests[ctx]
	var last *pendingWrite
	if r != nil && r.lastRev == rev && rev != 0 {
		last = r.last
	}
	w.mu.Unlock()
	if last == nil {
		return nil
	}
	written, err := jsonraw.SetResourceVersion(last.value, rev)
	if err != nil || !bytes.Equal(written, obj) {
		return nil
	}
	s := last.stamp
	return &s
}
