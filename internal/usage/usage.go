// Package usage records who calls each API version: for every request to a
// group/version's resource, by verb, user and user agent, how often, and
// when first and last. It answers "which clients still call v1beta1?"
// across replicas and restarts: each replica keeps its counts in memory
// (Recorder), writes them to the store at most once a flush interval under
// a key of its own (Persister), and the clients of a version are the sum of
// every replica's record (Read).
//
// Recording is on every request's path, so it takes no lock shared by all
// requests (the counts are sharded by client) and allocates nothing once a
// client is known. Memory is bounded: at most MaxClients clients per
// group/version are told apart, the others counted as overflow; requests
// to versions a resource does not serve (404s) are recorded as such, for
// at most MaxUnserved versions of a resource.
package usage

import (
	"hash/maphash"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// Key is one client of one resource's version.
type Key struct {
	Group     string `json:"group,omitempty"`
	Version   string `json:"version"`
	Resource  string `json:"resource"`
	Verb      string `json:"verb"`
	User      string `json:"user"`
	UserAgent string `json:"userAgent,omitempty"`
	// NotServed: the version was not served (the request got 404).
	NotServed bool `json:"notServed,omitempty"`
}

// GroupVersion names a key's group/version.
func (k Key) GroupVersion() string {
	if k.Group == "" {
		return k.Version
	}
	return k.Group + "/" + k.Version
}

// Entry is one client's calls: how many, first and last (Unix seconds).
type Entry struct {
	Key
	Count int64 `json:"count"`
	First int64 `json:"first"`
	Last  int64 `json:"last"`
}

// Defaults of a Recorder's bounds.
const (
	DefaultMaxClients  = 1000
	DefaultMaxUnserved = 8
)

const shards = 64

// Recorder counts requests by Key.
type Recorder struct {
	maxClients, maxUnserved int
	now                     func() int64
	seed                    maphash.Seed
	shards                  [shards]shard

	// mu guards the distinct-client counts (taken only for a new client).
	mu       sync.Mutex
	clients  map[string]int           // group/version → clients told apart
	overflow map[string]*atomic.Int64 // group/version → requests of clients beyond the bound
	unserved map[string]map[string]bool
}

type shard struct {
	mu sync.RWMutex
	m  map[Key]*counter
}

type counter struct {
	count       atomic.Int64
	first, last atomic.Int64
	// gone: Forget dropped the counter from its shard.
	gone atomic.Bool
}

// NewRecorder returns a recorder with the given bounds (0: the defaults).
func NewRecorder(maxClients, maxUnserved int) *Recorder {
	if maxClients <= 0 {
		maxClients = DefaultMaxClients
	}
	if maxUnserved <= 0 {
		maxUnserved = DefaultMaxUnserved
	}
	r := &Recorder{maxClients: maxClients, maxUnserved: maxUnserved, seed: maphash.MakeSeed(),
		now:     func() int64 { return time.Now().Unix() },
		clients: map[string]int{}, overflow: map[string]*atomic.Int64{}, unserved: map[string]map[string]bool{}}
	for i := range r.shards {
		r.shards[i].m = map[Key]*counter{}
	}
	return r
}

func (r *Recorder) shard(k *Key) *shard {
	var h maphash.Hash
	h.SetSeed(r.seed)
	h.WriteString(k.User)
	h.WriteString(k.Resource)
	h.WriteString(k.UserAgent)
	return &r.shards[h.Sum64()%shards]
}

// Record counts one request.
func (r *Recorder) Record(k Key) {
	s := r.shard(&k)
	now := r.now()
	for {
		s.mu.RLock()
		c := s.m[k]
		s.mu.RUnlock()
		if c == nil {
			if c = r.add(s, k, now); c == nil {
				return
			}
		}
		// The time before the count: a snapshot never shows a request
		// without its time, and Forget does not drop a counter whose
		// request it saw the time of.
		for l := c.last.Load(); l < now && !c.last.CompareAndSwap(l, now); l = c.last.Load() {
		}
		c.count.Add(1)
		if !c.gone.Load() {
			return
		}
		// Forgotten between the lookup and the count: counted again, in
		// the client's new counter.
	}
}

// add makes the counter of a new client, nil when its group/version has
// as many clients as it may tell apart (the request is counted as
// overflow) or the version is an unserved one too many.
func (r *Recorder) add(s *shard, k Key, now int64) *counter {
	gv := k.Group + "/" + k.Version
	r.mu.Lock()
	if k.NotServed {
		res := k.Group + "/" + k.Resource
		vs := r.unserved[res]
		if vs == nil {
			vs = map[string]bool{}
			r.unserved[res] = vs
		}
		if !vs[k.Version] && len(vs) >= r.maxUnserved {
			r.mu.Unlock()
			return nil
		}
		vs[k.Version] = true
	}
	s.mu.Lock()
	c := s.m[k]
	if c == nil {
		if r.clients[gv] >= r.maxClients {
			o := r.overflow[gv]
			if o == nil {
				o = &atomic.Int64{}
				r.overflow[gv] = o
			}
			s.mu.Unlock()
			r.mu.Unlock()
			o.Add(1)
			return nil
		}
		c = &counter{}
		c.first.Store(now)
		c.last.Store(now)
		s.m[k] = c
		r.clients[gv]++
	}
	s.mu.Unlock()
	r.mu.Unlock()
	return c
}

// Seed adds earlier counts (a record this replica wrote before it
// restarted) to the recorder's.
func (r *Recorder) Seed(entries []Entry) {
	for _, e := range entries {
		s := r.shard(&e.Key)
		c := r.add(s, e.Key, e.First)
		if c == nil {
			continue
		}
		c.count.Add(e.Count)
		if f := c.first.Load(); e.First < f {
			c.first.Store(e.First)
		}
		if c.last.Load() < e.Last {
			c.last.Store(e.Last)
		}
	}
}

// Snapshot returns every client's calls, sorted, and the overflow by
// group/version.
func (r *Recorder) Snapshot() ([]Entry, map[string]int64) {
	var out []Entry
	for i := range r.shards {
		s := &r.shards[i]
		s.mu.RLock()
		for k, c := range s.m {
			if n := c.count.Load(); n > 0 {
				out = append(out, Entry{Key: k, Count: n, First: c.first.Load(), Last: c.last.Load()})
			}
		}
		s.mu.RUnlock()
	}
	Sort(out)
	r.mu.Lock()
	over := map[string]int64{}
	for gv, o := range r.overflow {
		over[gv] = o.Load()
	}
	r.mu.Unlock()
	return out, over
}

// Forget drops the clients last seen before the Unix time since.
func (r *Recorder) Forget(since int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range r.shards {
		s := &r.shards[i]
		s.mu.Lock()
		for k, c := range s.m {
			if c.last.Load() < since {
				c.gone.Store(true)
				delete(s.m, k)
				r.clients[k.Group+"/"+k.Version]--
			}
		}
		s.mu.Unlock()
	}
}

// Sort orders entries by key.
func Sort(es []Entry) {
	sort.Slice(es, func(i, j int) bool { return less(es[i].Key, es[j].Key) })
}

func less(a, b Key) bool {
	switch {
	case a.Group != b.Group:
		return a.Group < b.Group
	case a.Version != b.Version:
		return a.Version < b.Version
	case a.Resource != b.Resource:
		return a.Resource < b.Resource
	case a.User != b.User:
		return a.User < b.User
	case a.UserAgent != b.UserAgent:
		return a.UserAgent < b.UserAgent
	case a.Verb != b.Verb:
		return a.Verb < b.Verb
	}
	return !a.NotServed && b.NotServed
}

// Merge sums entries of the same key (several replicas' records): counts
// added, the earliest first and the latest last.
func Merge(lists ...[]Entry) []Entry {
	byKey := map[Key]*Entry{}
	for _, l := range lists {
		for _, e := range l {
			if x := byKey[e.Key]; x != nil {
				x.Count += e.Count
				x.First = min(x.First, e.First)
				x.Last = max(x.Last, e.Last)
				continue
			}
			c := e
			byKey[e.Key] = &c
		}
	}
	out := make([]Entry, 0, len(byKey))
	for _, e := range byKey {
		out = append(out, *e)
	}
	Sort(out)
	return out
}
