package store

import (
	"fmt"
	"sync/atomic"

	"github.com/klauspost/compress/s2"
)

// Item is one object as the cache holds it: its encoded form, ready to send,
// and what lists and watches select on.
type Item struct {
	Key       string
	Namespace string
	Name      string
	UID       string
	// Labels is shared between items with the same labels: read only.
	Labels map[string]string
	// Rev is the object's resourceVersion: the revision it was last written
	// at (for a deletion event, the revision of the deletion).
	Rev int64
	// Raw is the stored JSON with metadata.resourceVersion set to Rev; nil
	// for an item the cache keeps compressed (read it with Bytes).
	Raw []byte
	// packed is the compressed Raw: with dict, S2 with that dictionary;
	// without, zstd after Raw's length (4 bytes, little-endian).
	packed []byte
	dict   *s2.Dict
	// Meta is whatever else the DecodeFunc extracted from the object for
	// the cache's users; the store does not look at it.
	Meta any
	// Written, when set, says this process wrote Raw through its own
	// write path and what that path vouches for (see WriteStamp); nil for
	// a value of unknown origin.
	Written *WriteStamp
	// memo is where users keep what they derive from this state of the
	// object (nil for items that are not the cache's).
	memo *Memo
}

// Memo returns the item's memo: a slot where users of the cache keep what
// they derive from this state of the object (its conversions to other
// versions), so that every reader shares the work. A change of the object
// is a new Item with an empty Memo. Items that are not the cache's have
// none (nil).
func (it *Item) Memo() *Memo { return it.memo }

// Memo is one item's memo slot. Its zero value is empty.
type Memo struct{ v atomic.Pointer[any] }

// Load returns what the slot holds, or nil.
func (m *Memo) Load() any {
	if p := m.v.Load(); p != nil {
		return *p
	}
	return nil
}

// Update replaces what the slot holds with f of it, retrying if another
// goroutine changed it meanwhile (so f may run more than once).
func (m *Memo) Update(f func(old any) any) {
	for {
		old := m.v.Load()
		var cur any
		if old != nil {
			cur = *old
		}
		next := f(cur)
		if m.v.CompareAndSwap(old, &next) {
			return
		}
	}
}

// DecodeFunc turns a stored value into an Item whose resourceVersion is rev.
type DecodeFunc func(key string, value []byte, rev int64) (*Item, error)

// EventType is the type of a watch event.
type EventType string

// Watch event types, as Kubernetes names them.
const (
	Added    EventType = "ADDED"
	Modified EventType = "MODIFIED"
	Deleted  EventType = "DELETED"
	Bookmark EventType = "BOOKMARK"
)

// Event is one change to the cached prefix.
type Event struct {
	Type EventType
	// Item is the object after the change; for Deleted, its last state with
	// Rev set to the revision of the deletion. Nil for a Bookmark.
	Item *Item
	// Prev is the object before the change (Modified, Deleted).
	Prev *Item
	// Rev is the revision of the change, or of the bookmark.
	Rev int64
}

// TooOldError says a watch asked for history the cache no longer has.
type TooOldError struct{ Requested, Oldest int64 }

func (e *TooOldError) Error() string {
	return fmt.Sprintf("too old resource version: %d (%d)", e.Requested, e.Oldest)
}

// TooLargeError says a read asked for a revision the cache has not reached
// in time, or etcd has not reached.
type TooLargeError struct{ Requested, Current int64 }

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("Too large resource version: %d, current: %d", e.Requested, e.Current)
}

// Is makes a TooLargeError an ErrFutureRevision.
func (e *TooLargeError) Is(target error) bool { return target == ErrFutureRevision }

// NewCachedItem gives it an empty memo, as the cache gives its items, and
// returns it: for users that build items themselves (tests).
func NewCachedItem(it *Item) *Item {
	it.memo = &Memo{}
	return it
}
