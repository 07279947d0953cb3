package store

import (
	"math"
	"strings"
	"sync"
)

// When this process makes every write (the embedded etcd), it knows which
// prefixes were written last at which revision, and which have writes in
// flight: a cache of a prefix no write is in flight under, that has
// applied the last write under it, is up to date at any revision the store
// has answered, without asking etcd for progress. (A progress request on
// the watch stream the caches share wakes every cache, a thousand with a
// provider's CRDs; and every CRD change checks its objects' cache.)
type prefixWrites struct {
	mu      sync.Mutex
	last    map[string]int64 // the revision of the last write under a prefix
	pending map[string]int   // writes in flight under a prefix
	expires map[string]bool  // prefixes written with a TTL: etcd deletes their keys itself
}

// prefixesOf are the prefixes a key is under that a cache may mirror: its
// first three path segments ("/a/", "/a/b/", "/a/b/c/").
func prefixesOf(key string) []string {
	var out []string
	for i := 1; i < len(key) && len(out) < 3; {
		j := strings.IndexByte(key[i:], '/')
		if j < 0 {
			break
		}
		i += j + 1
		out = append(out, key[:i])
	}
	return out
}

// begin records a write in flight under key.
func (p *prefixWrites) begin(key string, ttl bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.last == nil {
		p.last, p.pending, p.expires = map[string]int64{}, map[string]int{}, map[string]bool{}
	}
	for _, pre := range prefixesOf(key) {
		p.pending[pre]++
		if ttl {
			p.expires[pre] = true
		}
	}
}

// end records the end of a write under key: done at rev, not done
// (written is false: refused), or perhaps done (uncertain: the prefix is
// never known up to date again).
func (p *prefixWrites) end(key string, rev int64, written, uncertain bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pre := range prefixesOf(key) {
		if p.pending[pre]--; p.pending[pre] == 0 {
			delete(p.pending, pre)
		}
		switch {
		case uncertain:
			p.last[pre] = math.MaxInt64
		case written && rev > p.last[pre]:
			p.last[pre] = rev
		}
	}
}

// settled returns the revision of the last write under prefix, and false
// while a write is in flight under it or its keys expire by themselves.
func (p *prefixWrites) settled(prefix string) (int64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pending[prefix] > 0 || p.expires[prefix] {
		return 0, false
	}
	return p.last[prefix], true
}
