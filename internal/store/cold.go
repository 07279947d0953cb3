package store

import (
	"sync/atomic"
	"time"

	"github.com/google/btree"
	"github.com/klauspost/compress/dict"
	"github.com/klauspost/compress/s2"
)

// When a cache packs its objects (see pack.go): once it holds dictAfter
// of them, it makes a dictionary of dictSamples of them (at most dictSize
// bytes), and packs what it loads, and what it takes in while it is cold
// (Reading); a sweep packs the rest once it is cold again.
const (
	dictSamples = 256
	dictSize    = 32 << 10
	sweepBatch  = 1024
)

// Variables for tests (dictAfter also PackAfterForTests').
var (
	dictAfterN atomic.Int64
	coldAfter  = time.Minute
)

func init() { dictAfterN.Store(2048) }

// dictAfter is how many objects a cache holds before it packs them.
func dictAfter() int { return int(dictAfterN.Load()) }

// PackAfterForTests makes caches pack their objects from n objects on
// (2,048), and returns what restores it: for tests of the packed path
// through the whole server.
func PackAfterForTests(n int) (restore func()) {
	old := dictAfterN.Swap(int64(n))
	return func() { dictAfterN.Store(old) }
}

// Reading tells the cache that a client is reading its state as a whole
// (a list, a watch from its state). A cache read so in two seconds within
// coldAfter is hot: what it takes in is kept as it is. One list (an
// informer starting) leaves it cold. The server's own scans of a cache do
// not count.
func (c *Cache) Reading() {
	now := time.Now().UnixNano()
	// Written at most once a second: lists of many clients share the line.
	if last := c.readAt.Load(); now-last > int64(time.Second) && c.readAt.CompareAndSwap(last, now) {
		c.readBefore.Store(last)
	}
	c.sweepLater()
}

// sweepLater makes sure a sweep runs once the cache is cold again: what it
// took in while clients read it, and before it had a dictionary, is then
// packed too.
func (c *Cache) sweepLater() {
	// Without a dictionary there is nothing to pack (most caches: a
	// resource of fewer than dictAfter objects); grown schedules one.
	if c.dict.Load() != nil && c.sweeping.CompareAndSwap(false, true) {
		time.AfterFunc(coldAfter+coldAfter/60, c.sweepWhenCold)
	}
}

// sweepWhenCold sweeps the cache if it is cold, or waits until it is.
func (c *Cache) sweepWhenCold() {
	if wait := time.Duration(c.readBefore.Load() + int64(coldAfter) - time.Now().UnixNano()); wait > 0 {
		time.AfterFunc(wait+coldAfter/60, c.sweepWhenCold)
		return
	}
	c.sweep()
	c.sweeping.Store(false)
}

// sweep packs the cache's items kept as they are, sweepBatch at a time,
// each away from the cache's lock; an item is replaced by its packed copy
// (the same state, memo and origin) unless it changed meanwhile. It stops
// when clients read the cache again.
func (c *Cache) sweep() {
	d := c.dict.Load()
	if d == nil {
		return
	}
	start := ""
	for c.cold() {
		var raw []*Item
		var last *Item
		n := 0
		c.mu.RLock()
		if c.stopped {
			c.mu.RUnlock()
			return
		}
		c.tree.AscendGreaterOrEqual(&Item{Key: start}, func(it *Item) bool {
			n++
			last = it
			if it.packed == nil && len(it.Raw) > 0 && len(it.Raw) < packAbove {
				raw = append(raw, it)
			}
			return n < sweepBatch
		})
		c.mu.RUnlock()
		if last != nil {
			start = last.Key + "\x00"
		}
		packed := make([]*Item, len(raw))
		for i, it := range raw {
			cp := *it
			if cp.pack(d); cp.packed != nil {
				packed[i] = &cp
			}
		}
		c.mu.Lock()
		for i, cp := range packed {
			if cur, ok := c.tree.Get(raw[i]); ok && cur == raw[i] && cp != nil {
				c.tree.ReplaceOrInsert(cp)
			}
		}
		c.mu.Unlock()
		if n < sweepBatch {
			return
		}
	}
}

// cold reports whether clients read the cache in two seconds within
// coldAfter.
func (c *Cache) cold() bool {
	return time.Now().UnixNano()-c.readBefore.Load() > int64(coldAfter)
}

// packDict is the dictionary to pack an object taken in now with: nil
// while clients read the cache, or it has none.
func (c *Cache) packDict() *s2.Dict {
	d := c.dict.Load()
	if d == nil || !c.cold() {
		return nil
	}
	return d
}

// grown is called (c.mu held) when the cache took in a new object: at
// dictAfter objects the dictionary is made, from the objects then held,
// away from the cache's lock.
func (c *Cache) grown() {
	if c.tree.Len() < dictAfter() || c.dict.Load() != nil || !c.building.CompareAndSwap(false, true) {
		return
	}
	samples := sampleItems(c.tree)
	go func() {
		if d := buildDict(samples); d != nil {
			c.dict.Store(d)
			// The objects taken in before it are packed once the
			// cache is cold.
			c.sweepLater()
			return
		}
		// None could be made of these (objects that share nothing): try
		// again, with the objects then held, no sooner than coldAfter on.
		time.AfterFunc(coldAfter, func() { c.building.Store(false) })
	}()
}

// sampleItems returns the bytes of dictSamples items spread over tree.
func sampleItems(tree *btree.BTreeG[*Item]) [][]byte {
	step := max(tree.Len()/dictSamples, 1)
	out := make([][]byte, 0, dictSamples)
	i := 0
	tree.Ascend(func(it *Item) bool {
		if i%step == 0 && it.Size() < packAbove {
			out = append(out, it.Bytes())
		}
		i++
		return len(out) < dictSamples
	})
	return out
}

// buildDict makes an S2 dictionary of samples, or nil if it cannot.
func buildDict(samples [][]byte) *s2.Dict {
	b, err := dict.BuildS2Dict(samples, dict.Options{MaxDictSize: dictSize, HashBytes: 6})
	if err != nil {
		return nil
	}
	return s2.NewDict(b)
}

// NewPackedItem gives it an empty memo and keeps it packed with a
// dictionary made of samples, as a cold cache keeps its objects, and
// returns it: for tests of the cache's users.
func NewPackedItem(it *Item, samples [][]byte) *Item {
	it.memo = &Memo{}
	it.pack(buildDict(samples))
	return it
}
