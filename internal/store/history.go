package store

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/metadata"
)

// historyTimeout bounds reading etcd's history for one watch.
const historyTimeout = 10 * time.Second

// historyReaders is how many watches of a store read etcd's history at
// once: after a replica restarts, every client resumes from before its
// caches; each read holds up to HistoryBytes until its watch starts.
const historyReaders = 4

var historyStreams atomic.Int64

// etcdEvents reads from etcd the changes under the cache's prefix after
// revision from, up to revision to at least: the events a watch that
// resumes from before the cache's history needs (the cache started after
// it, or its history was cut short by its bounds; etcd keeps them until
// it compacts). They are the cache's own events as it would have made
// them, with their previous states, up to the revision it returns. A
// compacted revision is a TooOldError, as is a history that holds more
// than HistoryBytes: the client relists, as from a short history. At most
// historyReaders such reads run at once in a store: memory stays bounded
// when every client of a restarted replica resumes.
func (c *Cache) etcdEvents(ctx context.Context, from, to int64) ([]Event, int64, error) {
	if c.store == nil || c.store.historyReads == nil {
		return nil, 0, &TooOldError{Requested: from, Oldest: to}
	}
	select {
	case c.store.historyReads <- struct{}{}:
		defer func() { <-c.store.historyReads }()
	case <-ctx.Done():
		return nil, 0, ctx.Err()
	}
	// A stream of its own: its progress request wakes no other watch.
	sctx := metadata.AppendToOutgoingContext(clientv3.WithRequireLeader(ctx), "crdserver-watch", "history#"+strconv.FormatInt(historyStreams.Add(1), 10))
	wctx, cancel := context.WithTimeout(sctx, historyTimeout)
	defer cancel()
	wch := c.store.cli.Watch(wctx, c.prefix, clientv3.WithPrefix(), clientv3.WithRev(from+1), clientv3.WithPrevKV(), clientv3.WithProgressNotify(), clientv3.WithCreatedNotify())
	var out []Event
	bytes, last := 0, from
	// Once the watch is created, progress notifications say how far it
	// has sent what it had; etcd answers a request only once the watch
	// caught up, so it is asked again until then.
	var ask <-chan time.Time
	for {
		var resp clientv3.WatchResponse
		var ok bool
		select {
		case <-ask:
			if err := c.store.cli.RequestProgress(wctx); err != nil {
				return nil, 0, interpret(err)
			}
			continue
		case <-wctx.Done():
			return nil, 0, fmt.Errorf("reading etcd's history after revision %d: %w", from, wctx.Err())
		case resp, ok = <-wch:
		}
		if !ok {
			return nil, 0, fmt.Errorf("reading etcd's history after revision %d: the watch ended", from)
		}
		if resp.CompactRevision > 0 {
			return nil, 0, &TooOldError{Requested: from, Oldest: resp.CompactRevision}
		}
		if err := resp.Err(); err != nil {
			return nil, 0, interpret(err)
		}
		if resp.Created {
			t := time.NewTicker(50 * time.Millisecond)
			defer t.Stop()
			ask = t.C
			continue
		}
		for _, e := range resp.Events {
			ev, ok := c.historyEvent(ctx, e)
			last = max(last, e.Kv.ModRevision)
			if !ok {
				continue
			}
			bytes += ev.Item.Size() + replacedBytes(ev)
			if bytes > c.opts.HistoryBytes {
				return nil, 0, &TooOldError{Requested: from, Oldest: to}
			}
			out = append(out, ev)
		}
		if resp.IsProgressNotify() {
			last = max(last, resp.Header.Revision)
		}
		if last >= to {
			return out, last, nil
		}
	}
}

// historyEvent makes the cache's event of an etcd event read with its
// previous state; false for an object the cache could not read either.
func (c *Cache) historyEvent(ctx context.Context, e *clientv3.Event) (Event, bool) {
	key, rev := string(e.Kv.Key), e.Kv.ModRevision
	var prev *Item
	if e.PrevKv != nil {
		prev = c.historyItem(ctx, key, e.PrevKv.Value, e.PrevKv.ModRevision)
	}
	if e.Type == clientv3.EventTypeDelete {
		if prev == nil {
			return Event{}, false
		}
		it, err := c.decode(key, prev.Bytes(), rev)
		if err != nil {
			return Event{}, false
		}
		it.memo = &Memo{}
		it.pack(nil)
		return Event{Type: Deleted, Item: it, Prev: prev, Rev: rev}, true
	}
	it := c.historyItem(ctx, key, e.Kv.Value, rev)
	if it == nil {
		return Event{}, false
	}
	if prev == nil {
		return Event{Type: Added, Item: it, Rev: rev}, true
	}
	return Event{Type: Modified, Item: it, Prev: prev, Rev: rev}, true
}

func (c *Cache) historyItem(ctx context.Context, key string, stored []byte, rev int64) *Item {
	value, err := c.store.fromStorage(ctx, key, stored)
	if err != nil {
		return nil
	}
	it, err := c.decode(key, value, rev)
	if err != nil {
		return nil
	}
	it.memo = &Memo{}
	it.pack(nil)
	return it
}
