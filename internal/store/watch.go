package store

import (
	"context"
	"errors"
	"strings"
	"sync"

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

// Watcher receives the events of one watch. Live events wait in the
// watcher, in revision order, until Next takes them; Ready is signalled
// while any wait. Done is closed when the cache ends the watch (it fell
// too far behind, or the cache stopped); the events sent before that still
// wait for Next.
type Watcher struct {
	// Initial is the state a FromState watch starts from: the matching
	// items at revision Rev.
	Initial []*Item
	// Replay holds the events after WatchOptions.Rev that the history
	// still had, translated for this watcher, for a watch that resumes.
	Replay []Event
	// Rev is the revision the watch starts after: live events (Next)
	// are newer.
	Rev int64

	c         *Cache
	namespace string
	prefix    string
	filter    func(*Item) bool
	bookmarks bool
	done      chan struct{}
	closed    bool
	err       error

	// queue holds the live events Next has not taken, oldest first. It
	// grows with what waits, up to limit (the cache's WatcherBuffer), and
	// is let go once empty after a burst, so that an idle watcher holds
	// no buffer (a channel of WatcherBuffer events held 32 KB each).
	mu    sync.Mutex
	queue []Event
	limit int
	ready chan struct{} // a value while queue may hold events
}

// idleQueue is the most room an empty queue keeps.
const idleQueue = 64

// Ready is signalled when live events wait for Next. A signal may find
// none (another Next took them); Next then returns buf as it is.
func (w *Watcher) Ready() <-chan struct{} { return w.ready }

// Next appends the waiting live events, oldest first, to buf, at most most
// of them (all when most <= 0), and returns it. Ready is signalled again if
// more wait.
func (w *Watcher) Next(buf []Event, most int) []Event {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := len(w.queue)
	if most > 0 && n > most {
		n = most
	}
	buf = append(buf, w.queue[:n]...)
	rest := copy(w.queue, w.queue[n:])
	clear(w.queue[rest:]) // the items taken are not kept alive here
	w.queue = w.queue[:rest]
	switch {
	case rest > 0:
		w.signal()
	case cap(w.queue) > idleQueue:
		w.queue = nil
	}
	return buf
}

func (w *Watcher) signal() {
	select {
	case w.ready <- struct{}{}:
	default:
	}
}

// Bookmark queues a BOOKMARK at the cache's revision, after every event
// up to it, if the watch asked for bookmarks (WatchOptions.Bookmarks).
// Kubernetes sends one right before a watch times out, so that the client
// resumes from as near now as it can.
func (w *Watcher) Bookmark() {
	w.c.mu.Lock()
	defer w.c.mu.Unlock()
	if w.bookmarks {
		w.send(Event{Type: Bookmark, Rev: w.c.rev})
	}
}

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
			it.Raw, it.packed, it.dict = raw, nil, nil
		}
		return Event{Type: Deleted, Item: &it, Prev: ev.Prev, Rev: ev.Rev}, true
	}
	return Event{}, false
}

// send delivers ev without blocking; a watcher with WatcherBuffer events
// waiting is closed so that it cannot slow the cache or other watchers
// down.
func (w *Watcher) send(ev Event) {
	if w.closed {
		return
	}
	ev, ok := w.translate(ev)
	if !ok {
		return
	}
	w.mu.Lock()
	full := len(w.queue) >= w.limit
	if !full {
		w.queue = append(w.queue, ev)
	}
	w.mu.Unlock()
	if full {
		w.c.log.Info("watch cache: closing a watcher that fell behind", "prefix", w.c.prefix)
		w.closeLocked(nil)
		return
	}
	w.signal()
}

// Watch starts a watch. With FromState the Watcher holds the current state
// the watch starts from (Initial); otherwise the events after o.Rev (Replay):
// those the history holds, and before them, for a watch that resumes from
// before the history (the cache started after o.Rev, or its bounds cut
// the history short), those etcd still has (410 only once etcd compacted
// them, as kube-apiserver answers a watch it serves from etcd). Live
// events follow (Ready, Next).
func (c *Cache) Watch(ctx context.Context, o WatchOptions) (*Watcher, error) {
	// older are events before the history, read from etcd, up to olderTo.
	var older []Event
	olderTo := int64(-1)
	for {
		if !o.FromState {
			if err := c.WaitFresh(ctx, o.Rev); err != nil {
				return nil, err
			}
		} else if err := c.WaitReady(ctx); err != nil {
			return nil, err
		}
		c.mu.Lock()
		if !c.ready && !c.stopped {
			// The state is being replaced since the wait: wait again.
			c.mu.Unlock()
			continue
		}
		if c.ready && !o.FromState && o.Rev < c.oldest && olderTo < c.oldest {
			// Up to what the cache has applied: the history is then
			// needed only from there on.
			upto := c.rev
			c.mu.Unlock()
			evs, to, err := c.etcdEvents(ctx, o.Rev, upto)
			if err != nil {
				return nil, err
			}
			older, olderTo = evs, to
			continue
		}
		break
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
		limit:     c.opts.WatcherBuffer,
		ready:     make(chan struct{}, 1),
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
		after := o.Rev
		if o.Rev < c.oldest {
			// etcd's events up to what the cache has applied; the history
			// has the rest.
			after = min(olderTo, c.rev)
			for _, ev := range older {
				if ev.Rev > after {
					break
				}
				if tev, ok := w.translate(ev); ok {
					w.Replay = append(w.Replay, tev)
				}
			}
		}
		n := len(c.history)
		for i := 0; i < c.hlen; i++ {
			ev := c.history[(c.hstart+i)%n]
			if ev.Rev <= after {
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
