package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/btree"
	"github.com/klauspost/compress/s2"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// CacheOptions tune a Cache.
type CacheOptions struct {
	// History is how many recent events the cache keeps for watches that
	// resume from a resourceVersion (default 10000).
	History int
	// HistoryBytes bounds the bytes of the objects only the history holds
	// (the states later events replaced; default 16 MiB): a thousand large
	// CRDs, each written a few times, do not keep every revision. Older
	// events go first; a watch that resumes before them gets 410 Expired
	// and relists, as from a short history.
	HistoryBytes int
	// WatcherBuffer is how many events a watcher may fall behind before it
	// is closed (default 1000).
	WatcherBuffer int
	// BookmarkInterval is how often watchers that asked for bookmarks get
	// one (default one minute).
	BookmarkInterval time.Duration
	// FreshTimeout bounds how long a read waits for the cache to reach a
	// revision (default 3 seconds).
	FreshTimeout time.Duration
}

func (o *CacheOptions) defaults() {
	if o.History <= 0 {
		o.History = 10000
	}
	if o.HistoryBytes <= 0 {
		o.HistoryBytes = 16 << 20
	}
	if o.WatcherBuffer <= 0 {
		o.WatcherBuffer = 1000
	}
	if o.BookmarkInterval <= 0 {
		o.BookmarkInterval = time.Minute
	}
	if o.FreshTimeout <= 0 {
		o.FreshTimeout = 3 * time.Second
	}
}

func lessItem(a, b *Item) bool { return a.Key < b.Key }

// Cache mirrors every key under one prefix, fed by one etcd watch. It serves
// lists from memory and fans events out to any number of watchers.
type Cache struct {
	prefix string
	store  *Store
	decode DecodeFunc
	opts   CacheOptions
	log    *slog.Logger

	mu       sync.RWMutex
	tree     *btree.BTreeG[*Item]
	rev      int64 // every change up to rev is applied
	ready    bool
	revCh    chan struct{} // closed and replaced whenever rev moves
	history  []Event       // ring buffer, grown on demand up to opts.History
	hstart   int           // index of the oldest event in history
	hlen     int
	hbytes   int   // of the replaced states the history's events hold
	oldest   int64 // history holds every event after this revision
	lastEv   int64 // revision of the last event (or of the load)
	watchers map[*Watcher]struct{}
	// observers are told of the state and its changes as they are applied
	// (Observe).
	observers map[*observer]struct{}
	stopped   bool

	cancel context.CancelFunc
	done   chan struct{}
	// streamCtx is the context of the current watch (progress requests
	// name its stream).
	streamCtx context.Context

	// dict is the dictionary the cache packs its objects with while cold
	// (built once it holds dictAfter objects; building says a build runs);
	// readAt and readBefore are when clients last read it whole, and
	// before that (Reading; unix nanoseconds).
	dict               atomic.Pointer[s2.Dict]
	building           atomic.Bool
	readAt, readBefore atomic.Int64
	// sweeping says a sweep is scheduled or runs (cold.go).
	sweeping atomic.Bool

	// followCancel ends the current etcd watch (tests break it with it);
	// beforeResume, when set, runs before a failed watch is resumed.
	followCancel context.CancelFunc
	beforeResume func()
}

// NewCache starts mirroring prefix. Use WaitReady before serving from it and
// Stop when done.
func NewCache(s *Store, prefix string, decode DecodeFunc, opts CacheOptions, log *slog.Logger) *Cache {
	opts.defaults()
	ctx, cancel := context.WithCancel(context.Background())
	c := &Cache{
		prefix:   prefix,
		store:    s,
		decode:   decode,
		opts:     opts,
		log:      log,
		tree:     btree.NewG(32, lessItem),
		revCh:    make(chan struct{}),
		history:  make([]Event, min(opts.History, initialHistory)),
		watchers: map[*Watcher]struct{}{},
		cancel:   cancel,
		done:     make(chan struct{}),
	}
	go c.run(ctx)
	return c
}

// Prefix returns the key prefix the cache mirrors.
func (c *Cache) Prefix() string { return c.prefix }

// Stop ends the etcd watch and closes every watcher.
func (c *Cache) Stop() {
	c.cancel()
	<-c.done
}

// Ready reports whether the cache has loaded its initial state.
func (c *Cache) Ready() bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.ready
}

// Revision returns the revision the cache is synced to.
func (c *Cache) Revision() int64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.rev
}

// run keeps the cache in step with etcd until ctx ends. When the etcd
// watch fails (no quorum, a member gone), it is resumed from the last
// revision the cache applied, so that every event reaches the watchers in
// order and none is lost. Only when etcd no longer has that revision
// (compacted meanwhile) are the watchers ended with 410 Expired, so that
// their clients relist, and the state loaded again.
func (c *Cache) run(ctx context.Context) {
	defer close(c.done)
	defer c.closeAll(nil, true)
	backoff := newBackoff()
	rev, loaded := int64(0), false
	for ctx.Err() == nil {
		listed, err := c.follow(ctx, rev, backoff.reset, !loaded)
		loaded = loaded || listed
		if ctx.Err() != nil {
			return
		}
		if !loaded {
			c.log.Warn("watch cache: list failed", "prefix", c.prefix, "err", err)
			backoff.wait(ctx)
			continue
		}
		rev = c.Revision()
		c.mu.RLock()
		hook := c.beforeResume
		c.mu.RUnlock()
		if hook != nil {
			hook()
		}
		if errors.Is(err, ErrCompacted) {
			c.log.Warn("watch cache: etcd compacted the revisions not yet seen; watchers end with 410 Expired and the state is loaded again", "prefix", c.prefix, "revision", rev)
			c.expire(rev)
			loaded = false
			continue
		}
		c.log.Warn("watch cache: etcd watch ended, resuming", "prefix", c.prefix, "revision", rev, "err", err)
		backoff.wait(ctx)
	}
}

// backoff waits between attempts: 100 ms, doubling up to 2 s.
type backoff struct{ d time.Duration }

func newBackoff() *backoff { return &backoff{d: 100 * time.Millisecond} }

func (b *backoff) reset() { b.d = 100 * time.Millisecond }

func (b *backoff) wait(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-time.After(b.d):
	}
	b.d = min(b.d*2, 2*time.Second)
}

// expire ends every watcher with a TooOldError (their clients get 410
// Expired and relist) and marks the cache not ready until it is loaded
// again: no watch starts on a state about to be replaced.
func (c *Cache) expire(rev int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ready = false
	err := &TooOldError{Requested: rev, Oldest: rev + 1}
	for w := range c.watchers {
		w.closeLocked(err)
	}
}

// load reads the whole prefix and replaces the cache's state with it.
func (c *Cache) load(ctx context.Context) (int64, error) {
	end := PrefixEnd(c.prefix)
	tree := btree.NewG(32, lessItem)
	start, rev := c.prefix, int64(0)
	for {
		page, err := c.store.listRaw(ctx, start, end, rev, 10000)
		if err != nil {
			return 0, err
		}
		rev = page.Revision
		for _, it := range c.decodeAll(ctx, page.KVs) {
			if it != nil {
				tree.ReplaceOrInsert(it)
			}
		}
		if c.dict.Load() == nil && tree.Len() >= dictAfter() {
			// The dictionary is made of the objects loaded so far, which
			// are then packed with it (nobody else holds them yet), as
			// are the next pages' as they are decoded: a load packs
			// whether or not clients read the cache (a restart with a
			// million objects stored, which informers then list).
			if d := buildDict(sampleItems(tree)); d != nil {
				c.dict.Store(d)
				tree.Ascend(func(it *Item) bool {
					if it.packed == nil {
						it.pack(d)
					}
					return true
				})
			}
		}
		if !page.More || len(page.KVs) == 0 {
			break
		}
		start = page.KVs[len(page.KVs)-1].Key + "\x00"
	}
	c.mu.Lock()
	c.tree = tree
	c.history = make([]Event, min(c.opts.History, initialHistory))
	c.hstart, c.hlen, c.hbytes = 0, 0, 0
	c.oldest = rev
	c.lastEv = rev
	c.setRevLocked(rev)
	c.ready = true
	if len(c.observers) > 0 {
		items := c.itemsLocked()
		for o := range c.observers {
			o.sync(items, rev)
		}
	}
	c.mu.Unlock()
	return rev, nil
}

func (c *Cache) setRevLocked(rev int64) {
	if rev <= c.rev {
		return
	}
	c.rev = rev
	close(c.revCh)
	c.revCh = make(chan struct{})
}

// follow applies the etcd watch from rev+1 until it fails; progress is
// called whenever the watch delivers something. With load, the cache has
// no state yet: the watch starts at etcd's newest revision and the state
// is loaded once it is created, from a list at that revision or later
// (events the list holds already are skipped), and follow reports that it
// loaded it. (A watch from an older revision makes etcd read the values
// written since back from its database: with a thousand CRDs created in a
// row, every CRD's, and their pages stay resident.) The watch is on the
// store's shared stream (watchStream), which gives up a stalled stream
// for every cache at once.
func (c *Cache) follow(ctx context.Context, rev int64, progress func(), load bool) (bool, error) {
	stream := &c.store.stream
	wctx, cancel, done := stream.open(ctx)
	defer done()
	c.mu.Lock()
	c.followCancel = cancel
	c.streamCtx = wctx
	c.mu.Unlock()
	// No WithPrevKV: the cache holds every key's last state itself, and
	// etcd would read each replaced value back from its database for every
	// event it sends.
	opts := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithProgressNotify()}
	if load {
		opts = append(opts, clientv3.WithCreatedNotify())
	} else {
		opts = append(opts, clientv3.WithRev(rev+1))
	}
	wch := c.store.cli.Watch(wctx, c.prefix, opts...)
	tick := time.NewTicker(c.opts.BookmarkInterval)
	defer tick.Stop()
	listed := false
	var skip int64 // events up to the list's revision are in it
	for {
		select {
		case <-ctx.Done():
			return listed, ctx.Err()
		case <-tick.C:
			if !load || listed {
				c.bookmark()
			}
		case resp, ok := <-wch:
			stream.heardNow()
			if !ok {
				if wctx.Err() != nil && ctx.Err() == nil {
					return listed, errors.New("watch interrupted")
				}
				return listed, errors.New("watch channel closed")
			}
			if err := resp.Err(); err != nil {
				return listed, interpret(err)
			}
			if resp.CompactRevision > 0 {
				return listed, ErrCompacted
			}
			if load && !listed {
				if !resp.Created {
					continue
				}
				r, err := c.load(ctx)
				if err != nil {
					return false, err
				}
				listed, skip = true, r
				progress()
				continue
			}
			progress()
			if resp.IsProgressNotify() {
				c.mu.Lock()
				c.setRevLocked(resp.Header.Revision)
				c.mu.Unlock()
				continue
			}
			evs := resp.Events
			for len(evs) > 0 && evs[0].Kv.ModRevision <= skip {
				evs = evs[1:]
			}
			if len(evs) > 0 {
				c.apply(evs)
			}
		}
	}
}

func (c *Cache) apply(evs []*clientv3.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range evs {
		key := string(e.Kv.Key)
		rev := e.Kv.ModRevision
		prev, _ := c.tree.Get(&Item{Key: key})
		var ev Event
		switch e.Type {
		case clientv3.EventTypePut:
			// An object the cache cannot read or decode is left out (its
			// older state too), as when the cache loads: reading it fails
			// with the reason.
			value, err := c.store.fromStorage(context.Background(), key, e.Kv.Value)
			if err != nil {
				c.log.Error("watch cache: unreadable object skipped", "key", key, "err", err)
				c.tree.Delete(&Item{Key: key})
				continue
			}
			it, err := c.decode(key, value, rev)
			if err != nil {
				c.log.Error("watch cache: undecodable object skipped", "key", key, "err", err)
				c.tree.Delete(&Item{Key: key})
				continue
			}
			it.memo = &Memo{}
			it.Written = c.store.writes.claim(key, value)
			it.pack(c.packDict())
			c.tree.ReplaceOrInsert(it)
			if prev == nil {
				c.grown()
			}
			ev = Event{Type: Added, Item: it, Rev: rev}
			if prev != nil {
				ev.Type, ev.Prev = Modified, prev
			}
		case clientv3.EventTypeDelete:
			c.tree.Delete(&Item{Key: key})
			if prev == nil {
				continue // never cached (it could not be read)
			}
			it, err := c.decode(key, prev.Bytes(), rev)
			if err != nil {
				c.log.Error("watch cache: undecodable deleted object skipped", "key", key, "err", err)
				continue
			}
			it.memo = &Memo{}
			it.pack(c.packDict())
			it.Written = prev.Written // the last state is the cached one: so is its origin
			ev = Event{Type: Deleted, Item: it, Prev: prev, Rev: rev}
		}
		c.record(ev)
		c.setRevLocked(rev)
		for w := range c.watchers {
			w.send(ev)
		}
		for o := range c.observers {
			o.event(ev)
		}
	}
}

// decodeAll decodes (and packs) a page of a load, split across the CPUs:
// a restart with a million objects stored decodes them all. An object the
// store cannot read (encrypted with a key no longer configured) or decode
// is left out, loudly (nil): the others are served, and reading that
// object fails with the reason.
func (c *Cache) decodeAll(ctx context.Context, kvs []*KV) []*Item {
	out := make([]*Item, len(kvs))
	d := c.dict.Load()
	one := func(i int) {
		kv := kvs[i]
		value, err := c.store.fromStorage(ctx, kv.Key, kv.Value)
		if err != nil {
			c.log.Error("watch cache: unreadable object left out", "key", kv.Key, "err", err)
			return
		}
		it, err := c.decode(kv.Key, value, kv.ModRevision)
		if err != nil {
			c.log.Error("watch cache: undecodable object skipped", "key", kv.Key, "err", err)
			return
		}
		it.memo = &Memo{}
		it.pack(d)
		out[i] = it
	}
	parts := min(runtime.GOMAXPROCS(0), len(kvs)/256)
	if parts < 2 {
		for i := range kvs {
			one(i)
		}
		return out
	}
	var wg sync.WaitGroup
	size := (len(kvs) + parts - 1) / parts
	for p := range parts {
		wg.Go(func() {
			for i := p * size; i < min((p+1)*size, len(kvs)); i++ {
				one(i)
			}
		})
	}
	wg.Wait()
	return out
}

// record appends ev to the history ring, dropping the oldest events when
// it is full or holds more than HistoryBytes of replaced states.
func (c *Cache) record(ev Event) {
	n := len(c.history)
	if c.hlen == n && n < c.opts.History {
		c.growHistory()
		n = len(c.history)
	}
	if c.hlen == n {
		c.dropOldest()
	}
	c.history[(c.hstart+c.hlen)%n] = ev
	c.hlen++
	c.hbytes += replacedBytes(ev)
	c.lastEv = ev.Rev
	for c.hbytes > c.opts.HistoryBytes && c.hlen > 1 {
		c.dropOldest()
	}
}

// dropOldest drops the oldest event of the history.
func (c *Cache) dropOldest() {
	n := len(c.history)
	old := c.history[c.hstart]
	c.oldest = old.Rev
	c.hbytes -= replacedBytes(old)
	c.history[c.hstart] = Event{}
	c.hstart = (c.hstart + 1) % n
	c.hlen--
}

// replacedBytes is what an event holds that the current state does not:
// the state it replaced.
func replacedBytes(ev Event) int {
	if ev.Prev == nil {
		return 0
	}
	return ev.Prev.Size()
}

// initialHistory is the size a cache's history ring starts at: a server
// has a cache per resource, a platform's thousands of CRDs a cache each,
// most of which see a few events; the ring doubles as events come.
const initialHistory = 8

// growHistory doubles the history ring (at most to opts.History), keeping
// its events in order from index 0.
func (c *Cache) growHistory() {
	n := len(c.history)
	grown := make([]Event, min(max(2*n, 1), c.opts.History))
	for i := 0; i < c.hlen; i++ {
		grown[i] = c.history[(c.hstart+i)%n]
	}
	c.history, c.hstart = grown, 0
}

// LastEventRevision returns the revision of the newest change the cache has
// applied (or of its initial load): a watcher that has seen that revision
// has seen everything the cache has.
func (c *Cache) LastEventRevision() int64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.lastEv
}

func (c *Cache) bookmark() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for w := range c.watchers {
		if w.bookmarks {
			w.send(Event{Type: Bookmark, Rev: c.rev})
		}
	}
}

// closeAll ends every watcher (with err, if not nil); final marks the
// cache stopped.
func (c *Cache) closeAll(err error, final bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for w := range c.watchers {
		w.closeLocked(err)
	}
	if final {
		c.stopped = true
		c.ready = false
		// Nothing can watch a stopped cache: its history (a deleted
		// CRD's cache holds the deletion of every object) goes, even
		// while something still holds the cache.
		c.history, c.hstart, c.hlen = nil, 0, 0
	}
}

// Reaches reports whether the cache is loaded and has applied every change
// up to rev, without waiting.
func (c *Cache) Reaches(rev int64) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.ready && !c.stopped && (c.rev >= rev || c.settledLocked(rev))
}

// settledLocked reports whether the cache has every change up to rev, a
// revision the store answered, because this process makes every write and
// the cache has applied the last one under its prefix, with none in
// flight (see prefixWrites).
func (c *Cache) settledLocked(rev int64) bool {
	if c.store == nil || !c.store.onlyWriter || rev > c.store.newest.Load() {
		return false
	}
	last, ok := c.store.prefixes.settled(c.prefix)
	return ok && c.lastEv >= last
}

// advance moves the cache's revision on to rev when it has every change up
// to rev without having heard of rev (settledLocked): what it then serves
// (a list's resourceVersion, a bookmark) says so, rather than an older
// revision a client asked for a state no older than.
func (c *Cache) advance(rev int64) {
	c.mu.RLock()
	behind := c.rev < rev
	c.mu.RUnlock()
	if !behind || c.store == nil || !c.store.onlyWriter {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ready && !c.stopped && c.rev < rev && c.settledLocked(rev) {
		c.setRevLocked(rev)
	}
}

// WaitFresh waits until the cache has applied every change up to rev, for at
// most the FreshTimeout, asking etcd for progress notifications meanwhile.
func (c *Cache) WaitFresh(ctx context.Context, rev int64) error {
	if c.Reaches(rev) {
		c.advance(rev)
		return nil
	}
	deadline := time.NewTimer(c.opts.FreshTimeout)
	defer deadline.Stop()
	asked := false
	for {
		c.mu.RLock()
		cur, ch, ready, stopped, stream := c.rev, c.revCh, c.ready, c.stopped, c.streamCtx
		c.mu.RUnlock()
		if stopped {
			return errors.New("watch cache stopped")
		}
		if ready && cur >= rev {
			return nil
		}
		if ready && c.Reaches(rev) {
			c.advance(rev)
			return nil
		}
		if ready && !asked && c.store != nil && stream != nil && stream.Err() == nil {
			// Nothing changed under our prefix since rev: ask etcd, on our
			// watch's stream, to tell us how far it is.
			pctx, cancel := context.WithTimeout(stream, time.Second)
			_ = c.store.cli.RequestProgress(pctx)
			cancel()
			asked = true
		}
		select {
		case <-ch:
		case <-time.After(100 * time.Millisecond):
			asked = false
		case <-deadline.C:
			return &TooLargeError{Requested: rev, Current: cur}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// WaitReady waits until the cache has loaded its initial state.
func (c *Cache) WaitReady(ctx context.Context) error {
	for {
		c.mu.RLock()
		ready, ch := c.ready, c.revCh
		c.mu.RUnlock()
		if ready {
			return nil
		}
		select {
		case <-ch:
		case <-time.After(10 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// ListOptions select the items of a list.
type ListOptions struct {
	// Namespace restricts the list to keys under prefix+Namespace+"/".
	Namespace string
	// Start is the first key to return (inclusive); empty means the start.
	Start string
	// Limit is the most items to return (0: all).
	Limit int
	// Filter, if set, keeps only the items it accepts.
	Filter func(*Item) bool
}

// CachedList is a page of cached items.
type CachedList struct {
	Items []*Item
	// Rev is the revision the list reflects.
	Rev int64
	// Next is the key to continue from, empty when the list is complete.
	Next string
	// Remaining counts the keys after this page (items not filtered).
	Remaining int64
}

// List returns the cached items that match, in key order.
func (c *Cache) List(o ListOptions) CachedList {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return listTree(c.tree, c.rev, c.prefix, o)
}

// ListAt lists as List does, as of revision rev (a paginated list's
// next page): the cache's state is that of rev for the listed range when
// no key of the range changed after rev. It reports false when that cannot
// be told (rev is older than the history or later than the cache) or a
// key of the range changed: the page is then etcd's to give.
func (c *Cache) ListAt(o ListOptions, rev int64) (CachedList, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if !c.ready || rev > c.rev || rev < c.oldest {
		return CachedList{}, false
	}
	lo, hi := listRange(c.prefix, o)
	n := len(c.history)
	for i := c.hlen - 1; i >= 0; i-- {
		ev := c.history[(c.hstart+i)%n]
		if ev.Rev <= rev {
			break
		}
		if ev.Item != nil && ev.Item.Key >= lo && ev.Item.Key < hi {
			return CachedList{}, false
		}
	}
	return listTree(c.tree, rev, c.prefix, o), true
}

// listRange is the range of keys a list of o covers: [lo, hi).
func listRange(prefix string, o ListOptions) (lo, hi string) {
	lo = prefix
	if o.Namespace != "" {
		lo = prefix + o.Namespace + "/"
	}
	hi = PrefixEnd(lo)
	if o.Start > lo {
		lo = o.Start
	}
	return lo, hi
}

func listTree(tree *btree.BTreeG[*Item], rev int64, prefix string, o ListOptions) CachedList {
	lo, hi := listRange(prefix, o)
	out := CachedList{Rev: rev}
	full := false
	visit := func(it *Item) bool {
		if full {
			if out.Next == "" {
				out.Next = it.Key
			}
			out.Remaining++
			return true
		}
		if o.Filter == nil || o.Filter(it) {
			out.Items = append(out.Items, it)
			if o.Limit > 0 && len(out.Items) >= o.Limit {
				full = true
			}
		}
		return true
	}
	if o.Namespace == "" {
		// Every key of the tree is under the prefix: no upper bound to
		// compare each key with (long keys alike at their start cost a
		// whole list most of its time).
		tree.AscendGreaterOrEqual(&Item{Key: lo}, visit)
	} else {
		tree.AscendRange(&Item{Key: lo}, &Item{Key: hi}, visit)
	}
	return out
}

// Get returns the cached item at key.
func (c *Cache) Get(key string) (*Item, int64) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	it, _ := c.tree.Get(&Item{Key: key})
	return it, c.rev
}

// GetNewest returns the newest state of key, as a quorum read gives it:
// the cached item once the cache has applied every write made before the
// call (waiting up to the FreshTimeout for it); nil if there is none. A
// cache that follows no store (NewFixedCache) answers what it holds.
func (c *Cache) GetNewest(ctx context.Context, key string) (*Item, error) {
	if c.store != nil {
		cur, err := c.store.CurrentRevision(ctx)
		if err != nil {
			return nil, err
		}
		if err := c.WaitFresh(ctx, cur); err != nil {
			return nil, err
		}
	}
	it, _ := c.Get(key)
	return it, nil
}

// NewLoadingCache returns a cache that is loading its state and never
// finishes: for tests of what is served meanwhile.
func NewLoadingCache(prefix string) *Cache {
	c := NewFixedCache(prefix, 0)
	c.ready = false
	return c
}

// NewFixedCache returns a cache of fixed contents, at revision rev, that
// follows nothing: for the tests of a cache's users. Its watches see no
// events, and it never reaches a later revision.
func NewFixedCache(prefix string, rev int64, items ...*Item) *Cache {
	opts := CacheOptions{}
	opts.defaults()
	c := &Cache{
		prefix:   prefix,
		opts:     opts,
		log:      slog.New(slog.DiscardHandler),
		tree:     btree.NewG(32, lessItem),
		rev:      rev,
		ready:    true,
		revCh:    make(chan struct{}),
		history:  make([]Event, 1),
		oldest:   rev,
		lastEv:   rev,
		watchers: map[*Watcher]struct{}{},
		cancel:   func() {},
		done:     make(chan struct{}),
	}
	close(c.done)
	for _, it := range items {
		if !strings.HasPrefix(it.Key, prefix) {
			// A cache holds only keys under its prefix (lists rely on it).
			panic(fmt.Sprintf("store.NewFixedCache: key %q is not under %q", it.Key, prefix))
		}
		if it.memo == nil {
			it.memo = &Memo{}
		}
		c.tree.ReplaceOrInsert(it)
	}
	return c
}

// observer is one Observe's callbacks.
type observer struct {
	sync  func(items []*Item, rev int64)
	event func(Event)
}

// Observe keeps a consumer in step with the cache, as Follow does, but
// without a watcher of its own: sync is called with the whole state (now
// if the cache has one, and whenever it loads it again), event with every
// change, both as the cache applies them, under its lock: they must be
// quick and must not call back into the cache. It costs no goroutine and
// no buffer, for a consumer of every resource's cache. stop ends it.
func (c *Cache) Observe(sync func(items []*Item, rev int64), event func(Event)) (stop func()) {
	o := &observer{sync: sync, event: event}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.observers == nil {
		c.observers = map[*observer]struct{}{}
	}
	c.observers[o] = struct{}{}
	if c.ready {
		sync(c.itemsLocked(), c.rev)
	}
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		delete(c.observers, o)
	}
}

// itemsLocked is every item, in key order.
func (c *Cache) itemsLocked() []*Item {
	items := make([]*Item, 0, c.tree.Len())
	c.tree.Ascend(func(it *Item) bool {
		items = append(items, it)
		return true
	})
	return items
}
