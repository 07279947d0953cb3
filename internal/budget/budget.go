package budget

import (
	"container/list"
	"sync"
	"sync/atomic"
)

// Pool bounds the memory of the values built through it: when the values
// it holds cost more than its limit, the least recently used are released
// (and built again when next asked for).
type Pool struct {
	limit int64

	// epoch counts the entries added: an entry touched since the last
	// add is where it should be already, and is not moved again.
	epoch atomic.Uint64

	mu    sync.Mutex
	lru   *list.List // of *entry, most recently used first
	used  int64
	stats Stats
}

// Stats are what a Pool did.
type Stats struct {
	// Used is the estimated bytes of the values held; Limit the bound (0:
	// none); Values how many are held.
	Used, Limit int64
	Values      int
	// Builds counts the values built, Releases those released to stay
	// within the limit.
	Builds, Releases uint64
}

// New returns a pool that holds values of at most limit estimated bytes;
// with limit 0 or less it holds every value until it is dropped.
func New(limit int64) *Pool {
	if limit < 0 {
		limit = 0
	}
	return &Pool{limit: limit, lru: list.New()}
}

// Stats reports the pool's state.
func (p *Pool) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.stats
	s.Used, s.Limit, s.Values = p.used, p.limit, p.lru.Len()
	return s
}

// entry is a built value the pool holds.
type entry struct {
	cost    int64
	release func()
	elem    *list.Element // nil once released
	// dropped: the value was dropped, perhaps before it was added.
	dropped bool
	touched atomic.Uint64 // the pool's epoch when last moved to the front
}

// add holds a new entry, releasing others (least recently used first)
// while the pool is over its limit. The newest entry is kept even when it
// alone is over the limit: the request that built it uses it.
func (p *Pool) add(e *entry) {
	var victims []*entry
	p.mu.Lock()
	p.stats.Builds++
	if e.dropped {
		p.mu.Unlock()
		return
	}
	e.touched.Store(p.epoch.Add(1))
	e.elem = p.lru.PushFront(e)
	p.used += e.cost
	for p.limit > 0 && p.used > p.limit && p.lru.Len() > 1 {
		v := p.lru.Back().Value.(*entry)
		p.removeLocked(v)
		p.stats.Releases++
		victims = append(victims, v)
	}
	p.mu.Unlock()
	// Released outside the pool's lock, which need not wait for them.
	for _, v := range victims {
		v.release()
	}
}

func (p *Pool) removeLocked(e *entry) {
	if e.elem == nil {
		return
	}
	p.lru.Remove(e.elem)
	e.elem = nil
	p.used -= e.cost
}

// touch marks an entry used. Only an entry that another was added after
// since it was last touched moves: the hot path of a value used again and
// again takes no lock.
func (p *Pool) touch(e *entry) {
	epoch := p.epoch.Load()
	if e.touched.Load() == epoch {
		return
	}
	p.mu.Lock()
	if e.elem != nil {
		p.lru.MoveToFront(e.elem)
	}
	e.touched.Store(epoch)
	p.mu.Unlock()
}

// remove forgets an entry (its value was dropped).
func (p *Pool) remove(e *entry) {
	p.mu.Lock()
	e.dropped = true
	p.removeLocked(e)
	p.mu.Unlock()
}

// Value is a value built when first asked for and kept in a Pool, which
// may release it; it is then built again when next asked for. Its zero
// value is not usable: make it with NewValue.
type Value[T any] struct {
	pool  *Pool
	build func() (T, int64, error)

	mu  sync.Mutex // held while building
	cur atomic.Pointer[built[T]]
}

// built is one build's result and its place in the pool.
type built[T any] struct {
	v   T
	err error
	e   *entry
}

// NewValue returns a value that build makes (with its estimated cost in
// bytes) when it is first asked for, held in pool (nil: held until
// dropped, outside any pool). A build's error is kept like a value: it is
// the answer until the value is released or dropped.
func NewValue[T any](pool *Pool, build func() (T, int64, error)) *Value[T] {
	return &Value[T]{pool: pool, build: build}
}

// Get returns the value, building it if it is not held.
func (v *Value[T]) Get() (T, error) {
	if b := v.cur.Load(); b != nil {
		if v.pool != nil {
			v.pool.touch(b.e)
		}
		return b.v, b.err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if b := v.cur.Load(); b != nil {
		return b.v, b.err
	}
	val, cost, err := v.build()
	b := &built[T]{v: val, err: err}
	b.e = &entry{cost: max(cost, 0)}
	b.e.release = func() { v.cur.CompareAndSwap(b, nil) }
	v.cur.Store(b)
	if v.pool != nil {
		v.pool.add(b.e)
	}
	return val, err
}

// Built reports whether the value is held now.
func (v *Value[T]) Built() bool { return v.cur.Load() != nil }

// Drop releases the value now: what is no longer served (a CRD changed or
// gone) gives its memory back at once.
func (v *Value[T]) Drop() {
	b := v.cur.Swap(nil)
	if b != nil && v.pool != nil {
		v.pool.remove(b.e)
	}
}
