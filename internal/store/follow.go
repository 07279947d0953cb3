package store

import (
	"context"
	"time"
)

// Follow keeps a consumer in step with a cache, as an informer does: it
// calls sync with the whole state and its revision, then event for every
// change, and starts over (sync again) whenever the cache ends the watch,
// until ctx ends. sync and event run on the calling goroutine, one at a
// time.
func Follow(ctx context.Context, c *Cache, sync func(items []*Item, rev int64), event func(Event)) {
	for ctx.Err() == nil {
		w, err := c.Watch(ctx, WatchOptions{FromState: true})
		if err != nil {
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		sync(w.Initial, w.Rev)
		var evs []Event
	events:
		for {
			select {
			case <-ctx.Done():
				w.Stop()
				return
			case <-w.Done():
				break events
			case <-w.Ready():
				evs = w.Next(evs[:0], 0)
				for _, ev := range evs {
					event(ev)
				}
				clear(evs)
			}
		}
	}
}
