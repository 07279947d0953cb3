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
	FollowBuffered(ctx, c, 0, sync, event)
}

// FollowBuffered is Follow with a watcher that may fall buffer events
// behind (0: the cache's default) before it starts over: a consumer that
// follows every resource's cache keeps a small buffer per resource.
func FollowBuffered(ctx context.Context, c *Cache, buffer int, sync func(items []*Item, rev int64), event func(Event)) {
	for ctx.Err() == nil {
		w, err := c.Watch(ctx, WatchOptions{FromState: true, Buffer: buffer})
		if err != nil {
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		sync(w.Initial, w.Rev)
	events:
		for {
			select {
			case <-ctx.Done():
				w.Stop()
				return
			case <-w.Done():
				break events
			case ev := <-w.Events():
				event(ev)
			}
		}
	}
}
