package store

import (
	"time"

	"github.com/google/btree"
	"github.com/klauspost/compress/dict"
	"github.com/klauspost/compress/s2"
)

// When a cache packs its objects (see pack.go): once it holds dictAfter
// of them, it makes a dictionary of dictSamples of them (at most dictSize
// bytes), and packs what it loads, and what it takes in while it is cold:
// no client's list (or watch from its state) within coldAfter (Reading).
const (
	dictSamples = 256
	dictSize    = 32 << 10
	coldAfter   = time.Minute
)

var dictAfter = 2048 // a variable for tests

// Reading tells the cache that a client is reading its state as a whole
// (a list, a watch from its state): what it takes in within coldAfter is
// kept as it is. The server's own scans of a cache do not count.
func (c *Cache) Reading() {
	now := time.Now().UnixNano()
	// Written at most once a second: lists of many clients share the line.
	if now-c.readAt.Load() > int64(time.Second) {
		c.readAt.Store(now)
	}
}

// cold reports whether no client read the cache within coldAfter.
func (c *Cache) cold() bool {
	return time.Now().UnixNano()-c.readAt.Load() > int64(coldAfter)
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
	if c.tree.Len() < dictAfter || c.dict.Load() != nil || !c.building.CompareAndSwap(false, true) {
		return
	}
	samples := sampleItems(c.tree)
	go func() {
		if d := buildDict(samples); d != nil {
			c.dict.Store(d)
			return
		}
		// None could be made of these (objects that share nothing): try
		// again no sooner than another dictAfter objects on.
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
