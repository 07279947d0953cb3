package store

import (
	"context"
	"errors"
	"strings"

	"github.com/crdserver/crdserver/internal/jsonraw"
)

// WatchOptions say where a watch starts and what it sees.
type WatchOptions struct {
	// Namespace restricts the watch to one namespace.
	Namespace string
	// Filter keeps the items the watch is about (labels, fields).
	Filter func(*Item) bool
	// FromState starts the watch with the current state (as synthetic ADDED
	// events, returned as Initial) instead of replaying history after Rev.
	FromState bool
	// Rev is the revision to resume after when FromState is false.
	Rev int64
	// Bookmarks asks for periodic BOOKMARK events.
	Bookmarks bool
}

// Watcher receives the events of one watch. Events arrive on Events in
// revision order; Done is closed when the cache ends the watch (it fell
// too far behind, or the cache stopped).
type Watcher struct {
	// Initial is the state a FromState watch starts from: the matching
	// items at revision Rev.
	Initial []*Item
	// Replay holds the events after WatchOptions.Rev that the history
	// still had, translated for this watcher, for a watch that resumes.
	Replay []Event
	// Rev is the revision the watch starts after: live events on Events
	// are newer.
	Rev int64

	c         *Cache
	namespace string
	prefix    string
	filter    func(*Item) bool
	bookmarks bool
	ch        chan Event
	done      chan struct{}
	closed    bool
	err       error
}

// Events returns the channel of live events.
func (w *Watcher) Events() <-chan Event { return w.ch }

// Done is closed when the cache has ended this watch.
func (w *Watcher) Done() <-chan struct{} { return w.done }

// Err says why the cache ended the watch, once Done is closed: a
// TooOldError when the events it would need are gone (the client must
// relist), nil otherwise (it fell behind, or the cache stopped: resume from
// the last revision seen).
func (w *Watcher) Err() error {
	w.c.mu.RLock()
	defer w.c.mu.RUnlock()
	return w.err
}

// Stop ends the watch.
func (w *Watcher) Stop() {
	w.c.mu.Lock()
	defer w.c.mu.Unlock()
	w.closeLocked(nil)
}

func (w *Watcher) closeLocked(err error) {
	if w.closed {
		return
	}
	w.closed = true
	w.err = err
	delete(w.c.watchers, w)
	close(w.done)
}

func (w *Watcher) matches(it *Item) bool {
	if it == nil {
		return false
	}
	if w.namespace != "" && !strings.HasPrefix(it.Key, w.prefix) {
		return false
	}
	return w.filter == nil || w.filter(it)
}

// translate turns a cache event into what this watcher sees: an object that
// stops matching is DELETED (with its previous content at the event's
// revision), one that starts matching is ADDED.
func (w *Watcher) translate(ev Event) (Event, bool) {
	if ev.Type == Bookmark {
		return ev, true
	}
	cur := ev.Type != Deleted && w.matches(ev.Item)
	old := ev.Prev != nil && w.matches(ev.Prev)
	switch {
	case ev.Type == Deleted && old:
		return ev, true
	case cur && !old:
		return Event{Type: Added, Item: ev.Item, Rev: ev.Rev}, true
	case cur && old:
		return Event{Type: Modified, Item: ev.Item, Prev: ev.Prev, Rev: ev.Rev}, true
	case !cur && old:
		// The watcher needs the previous content at this revision.
		it := *ev.Prev
		it.Rev = ev.Rev
		it.memo = &Memo{}
		if raw, err := jsonraw.SetResourceVersion(it.Bytes(), ev.Rev); err == nil {
			it.Raw, it.packed = raw, nil
		}
		return Event{Type: Deleted, Item: &it, Prev: ev.Prev, Rev: ev.Rev}, true
	}
	return Event{}, false
}

// send delivers ev without blocking; a watcher whose buffer is full is
// closed so that it cannot slow the cache or other watchers down.
func (w *Watcher) send(ev Event) {
	if w.closed {
		return
	}
	ev, ok := w.translate(ev)
	if !ok {
		return
	}
	select {
	case w.ch <- ev:
	default:
		w.c.log.Info("watch cache: closing a watcher that fell behind", "prefix", w.c.prefix)
		w.closeLocked(nil)
	}
}

// Watch starts a watch. With FromState the Watcher holds the current state
// the watch starts from (Initial); otherwise the events after o.Rev that the
// history still holds (Replay). Live events follow on Events.
func (c *Cache) Watch(ctx context.Context, o WatchOptions) (*Watcher, error) {
	for {
		if !o.FromState {
			if err := c.WaitFresh(ctx, o.Rev); err != nil {
				return nil, err
			}
		} else if err := c.WaitReady(ctx); err != nil {
			return nil, err
		}
		c.mu.Lock()
		if c.ready || c.stopped {
			break
		}
		// The state is being replaced since the wait: wait again.
		c.mu.Unlock()
	}
	defer c.mu.Unlock()
	if c.stopped {
		return nil, errors.New("watch cache stopped")
	}
	w := &Watcher{
		c:         c,
		namespace: o.Namespace,
		prefix:    c.prefix + o.Namespace + "/",
		filter:    o.Filter,
		bookmarks: o.Bookmarks,
		ch:        make(chan Event, c.opts.WatcherBuffer),
		done:      make(chan struct{}),
	}
	if o.FromState {
		lo := c.prefix
		if o.Namespace != "" {
			lo = w.prefix
		}
		c.tree.AscendRange(&Item{Key: lo}, &Item{Key: PrefixEnd(lo)}, func(it *Item) bool {
			if w.matches(it) {
				w.Initial = append(w.Initial, it)
			}
			return true
		})
	} else {
		if o.Rev < c.oldest {
			return nil, &TooOldError{Requested: o.Rev, Oldest: c.oldest}
		}
		n := len(c.history)
		for i := 0; i < c.hlen; i++ {
			ev := c.history[(c.hstart+i)%n]
			if ev.Rev <= o.Rev {
				continue
			}
			if tev, ok := w.translate(ev); ok {
				w.Replay = append(w.Replay, tev)
			}
		}
	}
	w.Rev = c.rev
	c.watchers[w] = struct{}{}
	return w, nil
}
