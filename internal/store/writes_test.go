package store

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/crdserver/crdserver/internal/jsonraw"
)

// A value this process's write path announced carries its stamp into the
// cache; anything else (another request's context, another key, a write
// nobody announced, a value put into etcd by other means) carries none.
func TestWriteStamps(t *testing.T) {
	s := startStore(t)
	c := NewCache(s, "/w/", decodeTest, CacheOptions{}, slog.Default())
	defer c.Stop()
	bg := context.Background()
	if err := c.WaitReady(bg); err != nil {
		t.Fatal(err)
	}
	w, err := c.Watch(bg, WatchOptions{Rev: c.Revision()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var cancels []context.CancelFunc
	request := func() context.Context {
		ctx, cancel := context.WithCancel(bg)
		t.Cleanup(cancel)
		cancels = append(cancels, cancel)
		return ctx
	}
	stamp := WriteStamp{Epoch: 7, Defaulted: true}

	// Announced, then written by the same request: stamped.
	ctx := request()
	c.PrepareWrite(ctx, "/w/ns/a", stamp)
	rev, err := s.Create(ctx, "/w/ns/a", obj("ns", "a", "red"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if ev := next(t, w); ev.Item.Written == nil || *ev.Item.Written != stamp {
		t.Fatalf("own create: %+v", ev.Item.Written)
	}
	// The announcement is used up: the same request's next write of the
	// key is not vouched for.
	if rev, err = mustUpdate(t, s, ctx, "/w/ns/a", obj("ns", "a", "blue"), rev); err != nil {
		t.Fatal(err)
	}
	if ev := next(t, w); ev.Item.Written != nil {
		t.Fatalf("unannounced update: %+v", ev.Item.Written)
	}
	// Announced by one request, written by another: not stamped.
	c.PrepareWrite(request(), "/w/ns/a", stamp)
	if rev, err = mustUpdate(t, s, request(), "/w/ns/a", obj("ns", "a", "green"), rev); err != nil {
		t.Fatal(err)
	}
	if ev := next(t, w); ev.Item.Written != nil {
		t.Fatalf("another request's write: %+v", ev.Item.Written)
	}
	// Announced for another key: not stamped.
	ctx = request()
	c.PrepareWrite(ctx, "/w/ns/b", stamp)
	if rev, err = mustUpdate(t, s, ctx, "/w/ns/a", obj("ns", "a", "yellow"), rev); err != nil {
		t.Fatal(err)
	}
	if ev := next(t, w); ev.Item.Written != nil {
		t.Fatalf("another key's write: %+v", ev.Item.Written)
	}
	// A value put into etcd by other means is not, even right after an
	// announced write of the same key; and its deletion carries none.
	ctx = request()
	c.PrepareWrite(ctx, "/w/ns/a", WriteStamp{Epoch: 8})
	if _, err = mustUpdate(t, s, ctx, "/w/ns/a", obj("ns", "a", "black"), rev); err != nil {
		t.Fatal(err)
	}
	if ev := next(t, w); ev.Item.Written == nil || ev.Item.Written.Epoch != 8 || ev.Item.Written.Defaulted {
		t.Fatalf("own update: %+v", ev.Item.Written)
	}
	if _, err := s.cli.Put(bg, "/w/ns/a", string(obj("ns", "a", "white"))); err != nil {
		t.Fatal(err)
	}
	if ev := next(t, w); ev.Item.Written != nil {
		t.Fatalf("etcd put: %+v", ev.Item.Written)
	}
	kv, _, _ := s.Get(bg, "/w/ns/a", 0)
	if _, _, err := s.Delete(bg, "/w/ns/a", kv.ModRevision); err != nil {
		t.Fatal(err)
	}
	if ev := next(t, w); ev.Type != Deleted || ev.Item.Written != nil {
		t.Fatalf("deletion: %s %+v", ev.Type, ev.Item.Written)
	}
	// The request that wrote a value knows it for what it wrote, with its
	// resourceVersion; nothing else is.
	ctx = request()
	c.PrepareWrite(ctx, "/w/ns/f", stamp)
	rev, err = s.Create(ctx, "/w/ns/f", obj("ns", "f", "red"), 0)
	if err != nil {
		t.Fatal(err)
	}
	answer, _ := jsonraw.SetResourceVersion(obj("ns", "f", "red"), rev)
	if got := c.WrittenBy(ctx, answer, rev); got == nil || *got != stamp {
		t.Fatalf("WrittenBy of the request's own answer: %+v", got)
	}
	other, _ := jsonraw.SetResourceVersion(obj("ns", "f", "blue"), rev)
	if c.WrittenBy(ctx, other, rev) != nil || c.WrittenBy(ctx, answer, rev+1) != nil || c.WrittenBy(request(), answer, rev) != nil {
		t.Fatal("WrittenBy vouches for what the request did not write")
	}
	if ev := next(t, w); ev.Item.Written == nil {
		t.Fatal("own create not stamped")
	}

	// A write that fails leaves nothing behind; announcements whose
	// request ended are gone.
	ctx = request()
	c.PrepareWrite(ctx, "/w/ns/c", stamp)
	if _, _, err := s.Update(ctx, "/w/ns/c", obj("ns", "c", "red"), 1, 0); err == nil {
		t.Fatal("update of a missing key succeeded")
	}
	c.PrepareWrite(request(), "/w/ns/d", stamp)
	for _, cancel := range cancels {
		cancel()
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		s.writes.mu.Lock()
		prep, pend := len(s.writes.requests), s.writes.nPend
		s.writes.mu.Unlock()
		if prep == 0 && pend == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("records left: %d requests, %d written", prep, pend)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// A context that never ends announces nothing.
	c.PrepareWrite(bg, "/w/ns/e", stamp)
	if _, err := s.Create(bg, "/w/ns/e", obj("ns", "e", "red"), 0); err != nil {
		t.Fatal(err)
	}
	if ev := next(t, w); ev.Item.Written != nil {
		t.Fatalf("background write: %+v", ev.Item.Written)
	}
}

func mustUpdate(t *testing.T, s *Store, ctx context.Context, key string, value []byte, rev int64) (int64, error) {
	t.Helper()
	rev, _, err := s.Update(ctx, key, value, rev, 0)
	return rev, err
}
