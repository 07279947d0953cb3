package store

import (
	"bytes"
	"context"
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
// The link is exact, not a guess from revisions: a write that its caller
// vouches for carries a WriteStamp (WriteOptions.Stamp), and the value it
// writes waits, with the stamp, until the cache sees that very value at
// that key. Anything missing on the way (a value that differs, a write of
// another replica) only leaves the item without a stamp. A stamp names the
// schema revision the value was prepared under, so that a request still in
// flight on an older schema stamps what it writes with that older
// revision, which readers on the new one do not take as theirs. The
// request itself tells what it wrote to the conversion of its answer
// (Written, carried in the answer's context by WithWritten).

// WriteStamp is what this process's own write path vouches for in a value
// it wrote.
type WriteStamp struct {
	// Epoch is the revision of the schema the value was prepared under.
	Epoch int64
	// Defaulted says the value was written with every default of the
	// version it is stored in applied.
	Defaulted bool
}

// WriteOptions are what a write carries besides its value.
type WriteOptions struct {
	// TTL > 0: the key goes by itself that long after the write
	// (Kubernetes' events), or a little later.
	TTL time.Duration
	// Stamp, when set, is what the writer vouches for in the value: the
	// cache's item of this very value carries it (Item.Written).
	Stamp *WriteStamp
}

// Bounds of the records: beyond them a write simply goes without a stamp.
const (
	maxPending = 4096
	// pendingTTL: a written value not seen by a cache by then (its cache
	// reloaded meanwhile, say) is forgotten.
	pendingTTL = time.Minute
)

// writes holds, for one Store, the stamped values written that no cache
// has seen yet.
type writes struct {
	mu      sync.Mutex
	pending map[string][]*pendingWrite
	nPend   int
}

type pendingWrite struct {
	value    []byte
	stamp    WriteStamp
	deadline time.Time
}

// begin is called before a write of value at key with stamp (nil: the
// write goes without one): it records the value with its stamp. It returns
// the record (nil: none), for abort.
func (w *writes) begin(key string, value []byte, stamp *WriteStamp) *pendingWrite {
	if stamp == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
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
	pw := &pendingWrite{value: value, stamp: *stamp, deadline: now.Add(pendingTTL)}
	w.pending[key] = append(w.pending[key], pw)
	w.nPend++
	return pw
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

// Written is a value a request wrote (without resourceVersion), the
// revision it was written at and what the request vouched for in it.
type Written struct {
	Value []byte
	Rev   int64
	Stamp WriteStamp
}

// Vouches returns the stamp of w if obj is exactly what was written (the
// value with its resourceVersion rev set): the answer to a write need not
// be read as from storage. Nil otherwise.
func (w *Written) Vouches(obj []byte, rev int64) *WriteStamp {
	if w == nil || w.Rev != rev || rev == 0 {
		return nil
	}
	written, err := jsonraw.SetResourceVersion(w.Value, rev)
	if err != nil || !bytes.Equal(written, obj) {
		return nil
	}
	s := w.Stamp
	return &s
}

type writtenKey struct{}

// WithWritten is ctx carrying what the request wrote, for the conversion
// of its answer (WrittenFrom).
func WithWritten(ctx context.Context, w Written) context.Context {
	return context.WithValue(ctx, writtenKey{}, &w)
}

// WrittenFrom is what WithWritten put in ctx, nil for nothing.
func WrittenFrom(ctx context.Context) *Written {
	w, _ := ctx.Value(writtenKey{}).(*Written)
	return w
}
