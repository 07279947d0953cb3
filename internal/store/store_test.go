package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/crdserver/crdserver/internal/jsonraw"
)

func startStore(t *testing.T) *Store {
	t.Helper()
	ctx := context.Background()
	e, err := StartEmbedded(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return New(e.Client)
}

func decodeTest(key string, value []byte, rev int64) (*Item, error) {
	var obj struct {
		Metadata struct {
			Name      string            `json:"name"`
			Namespace string            `json:"namespace"`
			Labels    map[string]string `json:"labels"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(value, &obj); err != nil {
		return nil, err
	}
	raw, err := jsonraw.SetResourceVersion(value, rev)
	if err != nil {
		return nil, err
	}
	return &Item{Key: key, Name: obj.Metadata.Name, Namespace: obj.Metadata.Namespace, Labels: obj.Metadata.Labels, Rev: rev, Raw: raw}, nil
}

func obj(ns, name, color string) []byte {
	return []byte(fmt.Sprintf(`{"metadata":{"name":%q,"namespace":%q,"labels":{"color":%q}}}`, name, ns, color))
}

func TestCRUD(t *testing.T) {
	s := startStore(t)
	ctx := context.Background()
	rev, err := s.Create(ctx, "/r/a", []byte(`{"a":1}`), WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, "/r/a", []byte(`{}`), WriteOptions{}); !errors.Is(err, ErrExists) {
		t.Fatalf("second create: %v", err)
	}
	kv, _, err := s.Get(ctx, "/r/a", 0)
	if err != nil || kv.ModRevision != rev || string(kv.Value) != `{"a":1}` {
		t.Fatalf("get: %v %+v", err, kv)
	}
	if _, cur, err := s.Update(ctx, "/r/a", []byte(`{"a":2}`), rev-1, WriteOptions{}); !errors.Is(err, ErrConflict) || cur.ModRevision != rev {
		t.Fatalf("stale update: %v %+v", err, cur)
	}
	rev2, _, err := s.Update(ctx, "/r/a", []byte(`{"a":2}`), rev, WriteOptions{})
	if err != nil || rev2 <= rev {
		t.Fatalf("update: %v %d", err, rev2)
	}
	// Reads at an old revision see the old value until compaction.
	old, _, err := s.Get(ctx, "/r/a", rev)
	if err != nil || string(old.Value) != `{"a":1}` {
		t.Fatalf("get at rev: %v %+v", err, old)
	}
	if err := s.Compact(ctx, rev2); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Get(ctx, "/r/a", rev); !errors.Is(err, ErrCompacted) {
		t.Fatalf("get compacted: %v", err)
	}
	if _, _, err := s.Get(ctx, "/r/a", rev2+100); !errors.Is(err, ErrFutureRevision) || err.Error() != fmt.Sprintf("Too large resource version: %d, current: %d", rev2+100, rev2) {
		t.Fatalf("get future: %v", err)
	}
	if _, _, err := s.Delete(ctx, "/r/a", rev); !errors.Is(err, ErrConflict) {
		t.Fatalf("stale delete: %v", err)
	}
	if _, _, err := s.Delete(ctx, "/r/a", rev2); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Get(ctx, "/r/a", 0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get deleted: %v", err)
	}
	if _, _, err := s.Update(ctx, "/r/a", []byte(`{}`), rev2, WriteOptions{}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("update deleted: %v", err)
	}
}

func TestListPages(t *testing.T) {
	s := startStore(t)
	ctx := context.Background()
	for i := 0; i < 5; i++ {
		if _, err := s.Create(ctx, fmt.Sprintf("/r/k%d", i), []byte(`{}`), WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	page, err := s.List(ctx, "/r/", PrefixEnd("/r/"), 0, 2)
	if err != nil || len(page.KVs) != 2 || !page.More || page.Remaining != 3 {
		t.Fatalf("page 1: %v %+v", err, page)
	}
	if _, err := s.Create(ctx, "/r/k9", []byte(`{}`), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The next page at the first page's revision does not see k9.
	page2, err := s.List(ctx, page.KVs[1].Key+"\x00", PrefixEnd("/r/"), page.Revision, 0)
	if err != nil || len(page2.KVs) != 3 || page2.More {
		t.Fatalf("page 2: %v %+v", err, page2)
	}
}

func TestCacheListAndWatch(t *testing.T) {
	s := startStore(t)
	ctx := context.Background()
	if _, err := s.Create(ctx, "/c/ns1/a", obj("ns1", "a", "red"), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	c := readyCache(t, s, "/c/", CacheOptions{History: 4, BookmarkInterval: 50 * time.Millisecond})
	rev, err := s.Create(ctx, "/c/ns2/b", obj("ns2", "b", "red"), WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur, _ := s.CurrentRevision(ctx)
	if err := c.WaitFresh(ctx, cur); err != nil {
		t.Fatal(err)
	}
	l := c.List(ListOptions{})
	if len(l.Items) != 2 || l.Rev < rev || !strings.Contains(string(l.Items[1].Raw), fmt.Sprintf(`"resourceVersion":"%d"`, rev)) {
		t.Fatalf("list: %+v", l)
	}
	l = c.List(ListOptions{Namespace: "ns2"})
	if len(l.Items) != 1 || l.Items[0].Name != "b" {
		t.Fatalf("namespaced list: %+v", l)
	}
	l = c.List(ListOptions{Limit: 1})
	if len(l.Items) != 1 || l.Next != "/c/ns2/b" || l.Remaining != 1 {
		t.Fatalf("limited list: %+v", l)
	}

	red := func(it *Item) bool { return it.Labels["color"] == "red" }
	w, err := c.Watch(ctx, WatchOptions{FromState: true, Filter: red, Bookmarks: true})
	if err != nil || len(w.Initial) != 2 {
		t.Fatalf("watch: %v %+v", err, w)
	}
	defer w.Stop()
	kv, _, _ := s.Get(ctx, "/c/ns1/a", 0)
	if _, _, err := s.Update(ctx, "/c/ns1/a", obj("ns1", "a", "blue"), kv.ModRevision, WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	got := next(t, w)
	if got.Type != Deleted || got.Item.Name != "a" || !strings.Contains(string(got.Item.Raw), `"red"`) {
		t.Fatalf("leaving the selector: %+v", got)
	}
	if got.Item.Rev <= kv.ModRevision {
		t.Fatalf("DELETED carries the event's revision, got %d", got.Item.Rev)
	}
	kv, _, _ = s.Get(ctx, "/c/ns1/a", 0)
	if _, _, err := s.Update(ctx, "/c/ns1/a", obj("ns1", "a", "red"), kv.ModRevision, WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := next(t, w); got.Type != Added {
		t.Fatalf("entering the selector: %+v", got)
	}
	kv, _, _ = s.Get(ctx, "/c/ns2/b", 0)
	if _, _, err := s.Delete(ctx, "/c/ns2/b", kv.ModRevision); err != nil {
		t.Fatal(err)
	}
	if got := next(t, w); got.Type != Deleted || got.Item.Name != "b" || !strings.Contains(string(got.Item.Raw), `"color":"red"`) {
		t.Fatalf("delete (with the object's last state): %+v", got)
	}
	// Bookmarks arrive on their own.
	if got := next(t, w); got.Type != Bookmark {
		t.Fatalf("bookmark: %+v", got)
	}

	// Replay from history, then too old once the history has moved on.
	rw, err := c.Watch(ctx, WatchOptions{Rev: rev})
	if err != nil || len(rw.Replay) != 3 {
		t.Fatalf("replay: %v %+v", err, rw)
	}
	rw.Stop()
	for i := 0; i < 5; i++ {
		if _, err := s.Create(ctx, fmt.Sprintf("/c/ns3/x%d", i), obj("ns3", fmt.Sprint(i), "green"), WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cur, _ = s.CurrentRevision(ctx)
	if err := c.WaitFresh(ctx, cur); err != nil {
		t.Fatal(err)
	}
	// Once the history has moved on, etcd has the events before it: the
	// same events, in order, with their previous states.
	ew, err := c.Watch(ctx, WatchOptions{Rev: rev, Filter: red})
	if err != nil || len(ew.Replay) != 3 {
		t.Fatalf("replay from etcd: %v %+v", err, ew)
	}
	ew.Stop()
	if r := ew.Replay; r[0].Type != Deleted || r[1].Type != Added || r[2].Type != Deleted || r[2].Item.Name != "b" ||
		r[0].Item.Rev >= r[1].Item.Rev || !strings.Contains(string(r[0].Item.Bytes()), `"red"`) {
		t.Fatalf("replay from etcd: %+v", r)
	}
	all, err := c.Watch(ctx, WatchOptions{Rev: rev})
	if err != nil || len(all.Replay) != 8 {
		t.Fatalf("replay from etcd and history: %v %+v", err, all)
	}
	all.Stop()
	for i := 1; i < len(all.Replay); i++ {
		if all.Replay[i].Rev <= all.Replay[i-1].Rev {
			t.Fatalf("replay out of order: %+v", all.Replay)
		}
	}
	// More to read from etcd than HistoryBytes holds is too old, as a
	// short history is.
	var tooOld *TooOldError
	c.mu.Lock()
	c.opts.HistoryBytes = 100
	c.mu.Unlock()
	if _, err := c.Watch(ctx, WatchOptions{Rev: rev}); !errors.As(err, &tooOld) {
		t.Fatalf("expected too old beyond HistoryBytes, got %v", err)
	}
	c.mu.Lock()
	c.opts.HistoryBytes = 1 << 20
	c.mu.Unlock()
	// Too old only once etcd compacted it.
	if err := s.Compact(ctx, cur); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Watch(ctx, WatchOptions{Rev: rev}); !errors.As(err, &tooOld) {
		t.Fatalf("expected too old, got %v", err)
	}
	// A future revision times out as too large.
	c.opts.FreshTimeout = 200 * time.Millisecond
	var tooLarge *TooLargeError
	if err := c.WaitFresh(ctx, cur+1000); !errors.As(err, &tooLarge) {
		t.Fatalf("expected too large, got %v", err)
	}
}

func TestWaitFreshWithoutEvents(t *testing.T) {
	s := startStore(t)
	ctx := context.Background()
	c := readyCache(t, s, "/quiet/", CacheOptions{})
	// Writes elsewhere move the revision without events under /quiet/: a
	// progress notification brings the cache up to date.
	for i := 0; i < 3; i++ {
		if _, err := s.Create(ctx, fmt.Sprintf("/loud/%d", i), []byte(`{}`), WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cur, _ := s.CurrentRevision(ctx)
	if err := c.WaitFresh(ctx, cur); err != nil {
		t.Fatal(err)
	}
}

func next(t *testing.T, w *Watcher) Event {
	t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		if evs := w.Next(nil, 1); len(evs) == 1 {
			return evs[0]
		}
		select {
		case <-w.Ready():
		case <-w.Done():
			t.Fatal("watcher closed")
		case <-timeout:
			t.Fatal("no event")
		}
	}
}

// readyCache is a loaded cache of prefix, stopped when the test ends.
func readyCache(t *testing.T, s *Store, prefix string, o CacheOptions) *Cache {
	t.Helper()
	c := NewCache(s, prefix, decodeTest, o, slog.Default())
	t.Cleanup(c.Stop)
	if err := c.WaitReady(context.Background()); err != nil {
		t.Fatal(err)
	}
	return c
}

// watchState is a watch of c from its state, stopped when the test ends.
func watchState(t *testing.T, c *Cache) *Watcher {
	t.Helper()
	w, err := c.Watch(context.Background(), WatchOptions{FromState: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	return w
}

func TestSlowWatcherIsClosed(t *testing.T) {
	s := startStore(t)
	ctx := context.Background()
	c := readyCache(t, s, "/s/", CacheOptions{WatcherBuffer: 2})
	w := watchState(t, c)
	for i := 0; i < 5; i++ {
		if _, err := s.Create(ctx, fmt.Sprintf("/s/ns/%d", i), obj("ns", fmt.Sprint(i), "x"), WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-w.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("a watcher that does not read was not closed")
	}
}

// TestWatcherQueue: live events wait in order until taken, a few at a time
// if asked; Ready is signalled while any wait; a burst's room is let go
// once taken; what was sent before the cache ended a watch can still be
// taken.
func TestWatcherQueue(t *testing.T) {
	s := startStore(t)
	ctx := context.Background()
	c := readyCache(t, s, "/s/", CacheOptions{WatcherBuffer: 300})
	w := watchState(t, c)
	if evs := w.Next(nil, 0); len(evs) != 0 {
		t.Fatalf("events before any write: %v", evs)
	}
	const n = 200
	for i := range n {
		if _, err := s.Create(ctx, fmt.Sprintf("/s/ns/%03d", i), obj("ns", fmt.Sprintf("%03d", i), "x"), WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var got []Event
	deadline := time.After(10 * time.Second)
	for len(got) < n {
		select {
		case <-w.Ready():
			got = w.Next(got, 7)
		case <-deadline:
			t.Fatalf("%d of %d events", len(got), n)
		}
	}
	for i, ev := range got {
		if want := fmt.Sprintf("%03d", i); ev.Type != Added || ev.Item.Name != want {
			t.Fatalf("event %d: %s %s, want ADDED %s", i, ev.Type, ev.Item.Name, want)
		}
	}
	w.mu.Lock()
	room := cap(w.queue)
	w.mu.Unlock()
	if room > idleQueue {
		t.Errorf("an empty queue keeps room for %d events", room)
	}
	// Sent, then the watch ended: the event can still be taken.
	if _, err := s.Create(ctx, "/s/ns/last", obj("ns", "last", "x"), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w.Ready():
	case <-time.After(5 * time.Second):
		t.Fatal("no event")
	}
	w.Stop()
	<-w.Done()
	if evs := w.Next(nil, 0); len(evs) != 1 || evs[0].Item.Name != "last" {
		t.Fatalf("after the end: %v", evs)
	}
}

func TestEmbeddedRestartKeepsData(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	e, err := StartEmbedded(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(e.Client).Create(ctx, "/k", []byte("v"), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.Close()
	e, err = StartEmbedded(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	kv, _, err := New(e.Client).Get(ctx, "/k", 0)
	if err != nil || string(kv.Value) != "v" {
		t.Fatalf("after restart: %v %+v", err, kv)
	}
}

// The history ring starts small and grows to CacheOptions.History, keeping
// every event in order; then the oldest ones are dropped.
func TestHistoryGrows(t *testing.T) {
	c := &Cache{opts: CacheOptions{History: 300}}
	c.history = make([]Event, min(c.opts.History, initialHistory))
	replay := func(after int64) []int64 {
		var revs []int64
		for i := 0; i < c.hlen; i++ {
			if ev := c.history[(c.hstart+i)%len(c.history)]; ev.Rev > after {
				revs = append(revs, ev.Rev)
			}
		}
		return revs
	}
	for rev := int64(1); rev <= 250; rev++ {
		c.record(Event{Type: Added, Rev: rev})
		if got := replay(0); len(got) != int(rev) || got[0] != 1 || got[len(got)-1] != rev {
			t.Fatalf("after %d events the history holds %d (%v…)", rev, len(got), got[:min(len(got), 3)])
		}
	}
	if len(c.history) != 256 || c.oldest != 0 {
		t.Fatalf("ring of %d, oldest %d; want 256 and nothing dropped", len(c.history), c.oldest)
	}
	for rev := int64(251); rev <= 400; rev++ {
		c.record(Event{Type: Added, Rev: rev})
	}
	got := replay(0)
	if len(c.history) != 300 || len(got) != 300 || got[0] != 101 || got[299] != 400 || c.oldest != 100 {
		t.Fatalf("ring of %d holds %d events from %d, oldest %d; want 300 from 101, oldest 100", len(c.history), len(got), got[0], c.oldest)
	}
}

// ListAt gives a later page of a list from the cache while nothing in its
// range changed after the list's revision, and declines otherwise.
func TestListAt(t *testing.T) {
	s := startStore(t)
	ctx := context.Background()
	var rev int64
	for i := 0; i < 4; i++ {
		r, err := s.Create(ctx, fmt.Sprintf("/c/ns1/k%d", i), obj("ns1", fmt.Sprint(i), "red"), WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rev = r
	}
	c := NewCache(s, "/c/", decodeTest, CacheOptions{}, slog.Default())
	defer c.Stop()
	if err := c.WaitFresh(ctx, rev); err != nil {
		t.Fatal(err)
	}
	page := func(start string) (CachedList, bool) {
		return c.ListAt(ListOptions{Namespace: "ns1", Start: start, Limit: 2}, rev)
	}
	l, ok := page("/c/ns1/k2")
	if !ok || len(l.Items) != 2 || l.Items[0].Key != "/c/ns1/k2" || l.Rev != rev || l.Next != "" {
		t.Fatalf("unchanged: %v %+v", ok, l)
	}
	if _, ok := c.ListAt(ListOptions{Namespace: "ns1"}, rev+100); ok {
		t.Error("a revision the cache has not reached was listed")
	}
	// A change in another namespace, or before the start, leaves the page.
	other, err := s.Create(ctx, "/c/ns2/x", obj("ns2", "x", "red"), WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	early, err := s.Create(ctx, "/c/ns1/a", obj("ns1", "a", "red"), WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.WaitFresh(ctx, max(other, early)); err != nil {
		t.Fatal(err)
	}
	if l, ok := page("/c/ns1/k2"); !ok || len(l.Items) != 2 {
		t.Fatalf("changes outside the page's range: %v %+v", ok, l)
	}
	// A change in the range does not.
	kv, _, _ := s.Get(ctx, "/c/ns1/k3", 0)
	last, _, err := s.Delete(ctx, "/c/ns1/k3", kv.ModRevision)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.WaitFresh(ctx, last); err != nil {
		t.Fatal(err)
	}
	if _, ok := page("/c/ns1/k2"); ok {
		t.Error("a page whose range changed was listed from the cache")
	}
}

// A stopped cache holds no history: nothing can watch it, and a deleted
// CRD's cache would keep the deletion of each of its objects.
func TestStoppedCacheDropsHistory(t *testing.T) {
	s := startStore(t)
	ctx := context.Background()
	c := NewCache(s, "/c/", decodeTest, CacheOptions{}, slog.Default())
	if err := c.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	rev, err := s.Create(ctx, "/c/ns1/a", obj("ns1", "a", "red"), WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.WaitFresh(ctx, rev); err != nil {
		t.Fatal(err)
	}
	if c.hlen == 0 {
		t.Fatal("the create is not in the history")
	}
	c.Stop()
	if c.history != nil || c.hlen != 0 {
		t.Errorf("a stopped cache holds %d events", c.hlen)
	}
	if _, err := c.Watch(ctx, WatchOptions{Rev: rev - 1}); err == nil {
		t.Error("a stopped cache was watched")
	}
}

// TestOnlyWriterRevision: the embedded etcd's store knows the newest
// revision from its own answers (writes, reads, failed guards) without
// asking etcd; a store that is not the only writer asks etcd each time.
func TestOnlyWriterRevision(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, OpenOptions{Dir: t.TempDir(), NoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	if !s.OnlyWriter() {
		t.Fatal("the embedded etcd's store is not its only writer")
	}
	// Another writer on the same etcd, which the embedded one never has:
	// what it writes shows what CurrentRevision does not ask.
	other := New(s.cli)
	if other.OnlyWriter() {
		t.Fatal("a store over a client is its only writer")
	}
	check := func(what string, want int64) {
		t.Helper()
		got, err := s.CurrentRevision(ctx)
		if err != nil || got != want {
			t.Errorf("%s: CurrentRevision = %d, %v; want %d", what, got, err, want)
		}
	}
	rev, err := s.Create(ctx, "/registry/things/a", []byte(`{"metadata":{"name":"a"}}`), WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	check("after a create", rev)
	orev, err := other.Create(ctx, "/registry/things/b", []byte(`{"metadata":{"name":"b"}}`), WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	check("after another process's write", rev)
	if got, err := other.CurrentRevision(ctx); err != nil || got != orev {
		t.Errorf("the other store: CurrentRevision = %d, %v; want %d", got, err, orev)
	}
	// A failed guard answers with the newest revision too.
	if _, _, err := s.Update(ctx, "/registry/things/a", []byte(`{"metadata":{"name":"a"}}`), rev-1, WriteOptions{}); !errors.Is(err, ErrConflict) {
		t.Fatalf("update with an old revision: %v", err)
	}
	check("after a failed update", orev)
	urev, _, err := s.Update(ctx, "/registry/things/a", []byte(`{"metadata":{"name":"a","labels":{"x":"y"}}}`), rev, WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	check("after an update", urev)
	drev, _, err := s.Delete(ctx, "/registry/things/a", urev)
	if err != nil {
		t.Fatal(err)
	}
	check("after a delete", drev)
}

// The history keeps at most HistoryBytes of the states later events
// replaced: the oldest events go first, and the oldest revision a watch
// may resume from moves with them.
func TestHistoryBytes(t *testing.T) {
	c := &Cache{opts: CacheOptions{History: 1000, HistoryBytes: 1000}}
	c.history = make([]Event, min(c.opts.History, initialHistory))
	prev := &Item{Raw: make([]byte, 300)}
	c.record(Event{Type: Added, Rev: 1})
	for rev := int64(2); rev <= 10; rev++ {
		c.record(Event{Type: Modified, Rev: rev, Prev: prev})
	}
	// Three replaced states of 300 bytes fit in 1000.
	if c.hlen != 3 || c.hbytes != 900 || c.oldest != 7 {
		t.Fatalf("history of %d events, %d bytes, oldest %d; want 3, 900, 7", c.hlen, c.hbytes, c.oldest)
	}
	// An event that replaced nothing costs nothing.
	c.record(Event{Type: Added, Rev: 11})
	if c.hlen != 4 || c.hbytes != 900 {
		t.Fatalf("history of %d events, %d bytes", c.hlen, c.hbytes)
	}
	// One state larger than the bound keeps its own event.
	c.record(Event{Type: Deleted, Rev: 12, Prev: &Item{Raw: make([]byte, 5000)}})
	if c.hlen != 1 || c.oldest != 11 {
		t.Fatalf("history of %d events, oldest %d", c.hlen, c.oldest)
	}
}

// An observer gets the state, then every change in order, as the cache
// applies them; after stop, nothing.
func TestObserve(t *testing.T) {
	s := startStore(t)
	ctx := context.Background()
	if _, err := s.Create(ctx, "/o/ns/a", obj("ns", "a", "red"), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	c := readyCache(t, s, "/o/", CacheOptions{})
	var mu sync.Mutex
	var seen []string
	stop := c.Observe(func(items []*Item, _ int64) {
		mu.Lock()
		defer mu.Unlock()
		for _, it := range items {
			seen = append(seen, "sync "+it.Name)
		}
	}, func(ev Event) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, fmt.Sprintf("%s %s", ev.Type, ev.Item.Name))
	})
	rev, err := s.Create(ctx, "/o/ns/b", obj("ns", "b", "red"), WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Update(ctx, "/o/ns/b", obj("ns", "b", "blue"), rev, WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	cur, _ := s.CurrentRevision(ctx)
	if err := c.WaitFresh(ctx, cur); err != nil {
		t.Fatal(err)
	}
	stop()
	if _, err := s.Create(ctx, "/o/ns/c", obj("ns", "c", "red"), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	cur, _ = s.CurrentRevision(ctx)
	if err := c.WaitFresh(ctx, cur); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"sync a", "ADDED b", "MODIFIED b"}; !reflect.DeepEqual(seen, want) {
		t.Fatalf("observed %v, want %v", seen, want)
	}
}

// A large item is kept compressed: Bytes gives it back whole, Size its
// length; a small one is kept as it is.
func TestLargeItemsPacked(t *testing.T) {
	s := startStore(t)
	ctx := context.Background()
	big := fmt.Sprintf(`{"metadata":{"name":"big","namespace":"ns"},"data":%q}`, strings.Repeat("schema text ", 4000))
	rev, err := s.Create(ctx, "/p/ns/big", []byte(big), WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, "/p/ns/small", obj("ns", "small", "red"), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	c := readyCache(t, s, "/p/", CacheOptions{})
	it, _ := c.Get("/p/ns/big")
	want, _ := jsonraw.SetResourceVersion([]byte(big), rev)
	if it == nil || it.Raw != nil || len(it.packed) > len(big)/4 || !bytes.Equal(it.Bytes(), want) || it.Size() != len(want) {
		t.Fatalf("big item: packed %d bytes of %d, raw %v", len(it.packed), len(want), it.Raw != nil)
	}
	if small, _ := c.Get("/p/ns/small"); small == nil || small.Raw == nil || small.packed != nil {
		t.Fatal("a small item is packed")
	}
}

// When the store is etcd's only writer, a cache no write went to since it
// last applied one is up to date at the newest revision without an event;
// one a write went to is only once it applied that write.
func TestIdleCacheIsFresh(t *testing.T) {
	s := startStore(t)
	s.onlyWriter = true // as Open makes the embedded etcd's store
	ctx := context.Background()
	quiet := NewCache(s, "/quiet/", decodeTest, CacheOptions{}, slog.Default())
	defer quiet.Stop()
	busy := NewCache(s, "/busy/", decodeTest, CacheOptions{}, slog.Default())
	defer busy.Stop()
	for _, c := range []*Cache{quiet, busy} {
		if err := c.WaitReady(ctx); err != nil {
			t.Fatal(err)
		}
	}
	busy.mu.Lock() // holds back the busy cache's events
	rev, err := s.Create(ctx, "/busy/ns/a", obj("ns", "a", "red"), WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !quiet.Reaches(rev) {
		t.Error("an idle cache does not reach the newest revision")
	}
	// Waiting for it moves the idle cache's revision on: a list it serves
	// says it is of that revision, not of an older one (a client asking
	// for a state no older than rev got one that said it was older; the
	// robustness suite saw it).
	if err := quiet.WaitFresh(ctx, rev); err != nil || quiet.Revision() != rev || quiet.List(ListOptions{}).Rev != rev {
		t.Errorf("an idle cache fresh at %d says it is at %d (%v)", rev, quiet.Revision(), err)
	}
	if busy.settledLocked(rev) {
		t.Error("a cache that has not applied a write to it reaches past it")
	}
	busy.mu.Unlock()
	if err := busy.WaitFresh(ctx, rev); err != nil {
		t.Fatal(err)
	}
	// Keys that expire by themselves: never known up to date without etcd.
	if _, err := s.Create(ctx, "/quiet/ns/b", obj("ns", "b", "red"), WriteOptions{TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.prefixes.settled("/quiet/"); ok {
		t.Error("a prefix written with a TTL is settled")
	}
	if got := prefixesOf("/registry/g.io/widgets/ns/name"); !reflect.DeepEqual(got, []string{"/registry/", "/registry/g.io/", "/registry/g.io/widgets/"}) {
		t.Errorf("prefixes %v", got)
	}
}

// TestCacheLoadsWhileWritten starts a cache while objects are created,
// updated and deleted: its first load (a watch from etcd's newest revision,
// then a list) must end with etcd's state, every key at its revision, and a
// watcher must see the later writes once each, in order.
func TestCacheLoadsWhileWritten(t *testing.T) {
	s := startStore(t)
	ctx := context.Background()
	const n = 200
	write := func(i int) error {
		key := fmt.Sprintf("/w/ns/o%d", i%50)
		kv, _, err := s.Get(ctx, key, 0)
		switch {
		case errors.Is(err, ErrNotFound):
			_, err = s.Create(ctx, key, obj("ns", fmt.Sprint(i%50), "red"), WriteOptions{})
		case err != nil:
		case i%7 == 0:
			_, _, err = s.Delete(ctx, key, kv.ModRevision)
		default:
			_, _, err = s.Update(ctx, key, obj("ns", fmt.Sprint(i%50), fmt.Sprint("c", i)), kv.ModRevision, WriteOptions{})
		}
		return err
	}
	for i := range n / 2 {
		if err := write(i); err != nil {
			t.Fatal(err)
		}
	}
	// Writes go on while the cache loads, and for 20 more after it is
	// ready (at most 20n in all): fewer than the keys, so that the last
	// writes are each key's last, which a lost event would leave behind.
	ready, done := make(chan struct{}), make(chan error, 1)
	go func() {
		after := -1
		for i := n / 2; i < 20*n && i != after; i++ {
			if after < 0 {
				select {
				case <-ready:
					after = i + 20
				default:
				}
			}
			if err := write(i); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	c := readyCache(t, s, "/w/", CacheOptions{History: 1000, BookmarkInterval: time.Hour})
	close(ready)
	w := watchState(t, c)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	cur, _ := s.CurrentRevision(ctx)
	if err := c.WaitFresh(ctx, cur); err != nil {
		t.Fatal(err)
	}
	want, err := s.listRaw(ctx, "/w/", PrefixEnd("/w/"), 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	got := c.List(ListOptions{})
	if len(got.Items) != len(want.KVs) {
		t.Fatalf("cache holds %d objects, etcd %d", len(got.Items), len(want.KVs))
	}
	for i, kv := range want.KVs {
		if it := got.Items[i]; it.Key != kv.Key || it.Rev != kv.ModRevision {
			t.Fatalf("cache has %s at %d, etcd %s at %d", it.Key, it.Rev, kv.Key, kv.ModRevision)
		}
	}
	last := w.Rev
	for last < cur {
		ev := next(t, w)
		if ev.Rev != last+1 { // every write is under /w/
			t.Fatalf("event at revision %d after %d", ev.Rev, last)
		}
		last = ev.Rev
	}
}

// TestGetNewestSeesEveryEarlierWrite: an object read right after it was
// written is there, as a quorum read has it, every time (Get alone may
// run before the cache applied the write).
func TestGetNewestSeesEveryEarlierWrite(t *testing.T) {
	s := startStore(t)
	ctx := context.Background()
	c := readyCache(t, s, "/g/", CacheOptions{})
	for i := range 200 {
		name := fmt.Sprintf("o%d", i)
		if _, err := s.Create(ctx, "/g/ns/"+name, obj("ns", name, "red"), WriteOptions{}); err != nil {
			t.Fatal(err)
		}
		it, err := c.GetNewest(ctx, "/g/ns/"+name)
		if err != nil || it == nil {
			t.Fatalf("write %d: %v %v", i, it, err)
		}
	}
	if it, err := c.GetNewest(ctx, "/g/ns/none"); err != nil || it != nil {
		t.Fatalf("a key never written: %v %v", it, err)
	}
}

// lossyKV applies a transaction and then loses its answer, after running
// meanwhile (another client's write before the retry).
type lossyKV struct {
	clientv3.KV
	lose      int // how many answers to lose
	refuse    int // how many tries to refuse unapplied (no leader)
	meanwhile func()
}

func (l *lossyKV) Txn(ctx context.Context) clientv3.Txn {
	return &lossyTxn{Txn: l.KV.Txn(ctx), kv: l}
}

type lossyTxn struct {
	clientv3.Txn
	kv *lossyKV
}

func (t *lossyTxn) If(cs ...clientv3.Cmp) clientv3.Txn   { t.Txn = t.Txn.If(cs...); return t }
func (t *lossyTxn) Then(ops ...clientv3.Op) clientv3.Txn { t.Txn = t.Txn.Then(ops...); return t }
func (t *lossyTxn) Else(ops ...clientv3.Op) clientv3.Txn { t.Txn = t.Txn.Else(ops...); return t }

func (t *lossyTxn) Commit() (*clientv3.TxnResponse, error) {
	if t.kv.refuse > 0 {
		t.kv.refuse--
		return nil, rpctypes.ErrNoLeader
	}
	resp, err := t.Txn.Commit()
	if err != nil || t.kv.lose == 0 {
		return resp, err
	}
	t.kv.lose--
	if t.kv.meanwhile != nil {
		t.kv.meanwhile()
	}
	return nil, context.DeadlineExceeded
}

// A create whose answer was lost is never sent again: if the object was
// deleted meanwhile, the second try would create it a second time (the
// robustness suite saw an etcd leader killed under load do that). A read
// tells whether the lost try created it.
func TestCreateWithLostAnswer(t *testing.T) {
	s := startStore(t)
	ctx := context.Background()
	real := s.cli.KV
	defer func() { s.cli.KV = real }()

	// Created, then deleted by someone else before the answer came back:
	// not created again; the outcome stays unknown.
	lossy := &lossyKV{KV: real, lose: 1, meanwhile: func() {
		if _, err := real.Delete(ctx, "/lost/a"); err != nil {
			t.Error(err)
		}
	}}
	s.cli.KV = lossy
	if _, err := s.Create(ctx, "/lost/a", []byte(`{"a":1}`), WriteOptions{}); err == nil || errors.Is(err, ErrExists) {
		t.Fatalf("a create whose answer was lost: %v", err)
	}
	if _, _, err := s.Get(ctx, "/lost/a", 0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the create was applied twice: %v", err)
	}
	// Created and still there: the read tells the create succeeded.
	s.cli.KV = &lossyKV{KV: real, lose: 1}
	rev, err := s.Create(ctx, "/lost/b", []byte(`{"b":1}`), WriteOptions{})
	if err != nil {
		t.Fatalf("a create whose answer was lost, found created: %v", err)
	}
	if kv, _, err := s.Get(ctx, "/lost/b", 0); err != nil || kv.ModRevision != rev {
		t.Fatalf("created at %d, stored %+v %v", rev, kv, err)
	}
}

// An update or a delete whose answer was lost is sent again; its guard
// keeps it from applying twice. An update whose value is stored succeeded;
// otherwise, and for a delete, another write may have followed the lost
// try: the outcome is unknown, not a conflict or a not-found.
func TestGuardedWritesWithLostAnswer(t *testing.T) {
	s := startStore(t)
	ctx := context.Background()
	real := s.cli.KV
	defer func() { s.cli.KV = real }()
	rev, err := s.Create(ctx, "/lost/u", []byte(`{"v":0}`), WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Applied, answer lost, nothing else happened: success.
	s.cli.KV = &lossyKV{KV: real, lose: 1}
	rev1, _, err := s.Update(ctx, "/lost/u", []byte(`{"v":1}`), rev, WriteOptions{})
	if err != nil || rev1 <= rev {
		t.Fatalf("an update found applied: %d %v", rev1, err)
	}
	// Applied, answer lost, then another client's write: unknown.
	s.cli.KV = &lossyKV{KV: real, lose: 1, meanwhile: func() {
		if _, err := real.Put(ctx, "/lost/u", `{"v":"other"}`); err != nil {
			t.Error(err)
		}
	}}
	if _, _, err := s.Update(ctx, "/lost/u", []byte(`{"v":2}`), rev1, WriteOptions{}); !errors.Is(err, ErrUnknownOutcome) {
		t.Fatalf("an update overwritten after its lost answer: %v", err)
	}
	// A try refused before etcd proposed it says nothing of the next:
	// a stale revision is a conflict.
	s.cli.KV = &lossyKV{KV: real, refuse: 1}
	if _, _, err := s.Update(ctx, "/lost/u", []byte(`{"v":3}`), rev, WriteOptions{}); !errors.Is(err, ErrConflict) {
		t.Fatalf("an update refused once, then stale: %v", err)
	}
	// A delete applied, answer lost: nothing tells it from another's.
	kv, _, _ := s.Get(ctx, "/lost/u", 0)
	s.cli.KV = &lossyKV{KV: real, lose: 1}
	if _, _, err := s.Delete(ctx, "/lost/u", kv.ModRevision); !errors.Is(err, ErrUnknownOutcome) {
		t.Fatalf("a delete whose answer was lost: %v", err)
	}
	if _, _, err := s.Get(ctx, "/lost/u", 0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the delete was not applied: %v", err)
	}
}

// Objects taken in while a cache is cold are kept compressed with a
// dictionary made of the cache's own objects, once it holds dictAfter:
// those it loads, and those it applies; read back, each is what was
// stored. Objects applied while the cache is listed are kept as they are.
func TestColdItemsPacked(t *testing.T) {
	defer func(d time.Duration) { coldAfter = d }(coldAfter)
	defer PackAfterForTests(64)()
	s := startStore(t)
	ctx := context.Background()
	value := func(i int) []byte {
		return []byte(fmt.Sprintf(`{"apiVersion":"example.com/v1","kind":"Release","metadata":{"name":"r%04d","namespace":"ns","labels":{"app":"app-%d","team":"platform"}},`+
			`"spec":{"interval":"5m","path":"./apps/app-%d/overlays/prod","sourceRef":{"kind":"GitRepository","name":"platform-repo","namespace":"flux-system"}},`+
			`"status":{"conditions":[{"type":"Ready","status":"True","reason":"ReconciliationSucceeded","message":"Applied revision: main@sha1:%040x"}]}}`, i, i%7, i%7, i*7919))
	}
	want := map[string][]byte{}
	create := func(i int) {
		t.Helper()
		key := fmt.Sprintf("/p/ns/r%04d", i)
		rev, err := s.Create(ctx, key, value(i), WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want[key], _ = jsonraw.SetResourceVersion(value(i), rev)
	}
	check := func(c *Cache, key string) *Item {
		t.Helper()
		it, _ := c.Get(key)
		if it == nil {
			t.Fatalf("%s not cached", key)
		}
		if b := it.Bytes(); !bytes.Equal(b, want[key]) || it.Size() != len(want[key]) {
			t.Fatalf("%s: read back %s (size %d), want %s", key, b, it.Size(), want[key])
		}
		if b := it.AppendBytes([]byte("x")); !bytes.Equal(b, append([]byte("x"), want[key]...)) {
			t.Fatalf("%s: appended %s", key, b)
		}
		return it
	}
	for i := range 100 {
		create(i)
	}
	loaded := readyCache(t, s, "/p/", CacheOptions{})
	packed, size := 0, 0
	for key := range want {
		if it := check(loaded, key); it.Packed() {
			packed++
			size += len(it.packed)
		}
	}
	if packed != 100 || size > 100*len(value(0))/2 {
		t.Fatalf("loaded: %d of 100 packed, into %d bytes (of %d)", packed, size, 100*len(value(0)))
	}

	applied := readyCache(t, s, "/q/", CacheOptions{})
	for i := range 200 {
		key := fmt.Sprintf("/q/ns/r%04d", i)
		rev, err := s.Create(ctx, key, value(i), WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want[key], _ = jsonraw.SetResourceVersion(value(i), rev)
		if i == dictAfter() {
			// The dictionary is made away from the cache's lock.
			if !pollUntil(t, func() bool { return applied.dict.Load() != nil }) {
				t.Fatal("no dictionary made")
			}
		}
	}
	cur, _ := s.CurrentRevision(ctx)
	if err := applied.WaitFresh(ctx, cur); err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		it := check(applied, fmt.Sprintf("/q/ns/r%04d", i))
		if i > dictAfter() && !it.Packed() {
			t.Fatalf("object %d taken in cold, with a dictionary, is not packed", i)
		}
	}
	// The server's own scans do not make it hot.
	if l := applied.List(ListOptions{}); len(l.Items) != 200 || applied.packDict() == nil {
		t.Fatalf("list: %d items; packs: %v", len(l.Items), applied.packDict() != nil)
	}
	// Read by a client once (an informer starting): still cold.
	applied.Reading()
	if applied.packDict() == nil {
		t.Fatal("one list made the cache hot")
	}
	// Read by clients in two seconds: what it takes in now stays as it is.
	applied.readAt.Add(-int64(2 * time.Second))
	applied.Reading()
	key := "/q/ns/r9999"
	rev, err := s.Create(ctx, key, value(9999), WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want[key], _ = jsonraw.SetResourceVersion(value(9999), rev)
	if err := applied.WaitFresh(ctx, rev); err != nil {
		t.Fatal(err)
	}
	if it := check(applied, key); it.Packed() {
		t.Fatal("an object taken in while the cache is listed is packed")
	}
	// Cold again: the sweep packs it, and those taken in before the
	// dictionary; each reads back as stored, and the next write of one
	// replaces it as any write does.
	coldAfter = 50 * time.Millisecond
	applied.sweeping.Store(false) // the sweep scheduled with the minute
	applied.sweepLater()
	if !pollUntil(t, func() bool {
		it, _ := applied.Get(key)
		first, _ := applied.Get("/q/ns/r0000")
		return it.Packed() && first.Packed()
	}) {
		t.Fatal("the sweep did not pack what the cache kept as it was")
	}
	for i := range 200 {
		check(applied, fmt.Sprintf("/q/ns/r%04d", i))
	}
	check(applied, key)
	rev, _, err = s.Update(ctx, key, value(7), rev, WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want[key], _ = jsonraw.SetResourceVersion(value(7), rev)
	if err := applied.WaitFresh(ctx, rev); err != nil {
		t.Fatal(err)
	}
	check(applied, key)
}

// pollUntil polls cond every 5 ms for up to 10 s.
func pollUntil(t *testing.T, cond func() bool) bool {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}
