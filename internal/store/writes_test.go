package store

import (
	"context"
	"log/slog"
	"testing"

	"github.com/crdserver/crdserver/internal/jsonraw"
)

// A value written with a stamp carries it into the cache; anything else (a
// write without one, a value put into etcd by other means, a deletion)
// carries none.
func TestWriteStamps(t *testing.T) {
	s := startStore(t)
	c := NewCache(s, "/w/", decodeTest, CacheOptions{}, slog.Default())
	defer c.Stop()
	ctx := context.Background()
	if err := c.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	w, err := c.Watch(ctx, WatchOptions{Rev: c.Revision()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	stamp := WriteStamp{Epoch: 7, Defaulted: true}

	// Written with a stamp: stamped.
	rev, err := s.Create(ctx, "/w/ns/a", obj("ns", "a", "red"), WriteOptions{Stamp: &stamp})
	if err != nil {
		t.Fatal(err)
	}
	if ev := next(t, w); ev.Item.Written == nil || *ev.Item.Written != stamp {
		t.Fatalf("stamped create: %+v", ev.Item.Written)
	}
	// Written without: not stamped.
	if rev, err = mustUpdate(t, s, ctx, "/w/ns/a", obj("ns", "a", "blue"), rev); err != nil {
		t.Fatal(err)
	}
	if ev := next(t, w); ev.Item.Written != nil {
		t.Fatalf("unstamped update: %+v", ev.Item.Written)
	}
	// A value put into etcd by other means is not, even right after a
	// stamped write of the same key; and its deletion carries none.
	if _, _, err = s.Update(ctx, "/w/ns/a", obj("ns", "a", "black"), rev, WriteOptions{Stamp: &WriteStamp{Epoch: 8}}); err != nil {
		t.Fatal(err)
	}
	if ev := next(t, w); ev.Item.Written == nil || ev.Item.Written.Epoch != 8 || ev.Item.Written.Defaulted {
		t.Fatalf("stamped update: %+v", ev.Item.Written)
	}
	if _, err := s.cli.Put(ctx, "/w/ns/a", string(obj("ns", "a", "white"))); err != nil {
		t.Fatal(err)
	}
	if ev := next(t, w); ev.Item.Written != nil {
		t.Fatalf("etcd put: %+v", ev.Item.Written)
	}
	kv, _, _ := s.Get(ctx, "/w/ns/a", 0)
	if _, _, err := s.Delete(ctx, "/w/ns/a", kv.ModRevision); err != nil {
		t.Fatal(err)
	}
	if ev := next(t, w); ev.Type != Deleted || ev.Item.Written != nil {
		t.Fatalf("deletion: %s %+v", ev.Type, ev.Item.Written)
	}

	// What a request wrote vouches for its answer (the value with its
	// resourceVersion), and for nothing else.
	rev, err = s.Create(ctx, "/w/ns/f", obj("ns", "f", "red"), WriteOptions{Stamp: &stamp})
	if err != nil {
		t.Fatal(err)
	}
	written := WrittenFrom(WithWritten(ctx, Written{Value: obj("ns", "f", "red"), Rev: rev, Stamp: stamp}))
	answer, _ := jsonraw.SetResourceVersion(obj("ns", "f", "red"), rev)
	if got := written.Vouches(answer, rev); got == nil || *got != stamp {
		t.Fatalf("Vouches for the request's own answer: %+v", got)
	}
	other, _ := jsonraw.SetResourceVersion(obj("ns", "f", "blue"), rev)
	if written.Vouches(other, rev) != nil || written.Vouches(answer, rev+1) != nil || WrittenFrom(ctx).Vouches(answer, rev) != nil {
		t.Fatal("Vouches for what the request did not write")
	}
	if ev := next(t, w); ev.Item.Written == nil {
		t.Fatal("stamped create not stamped")
	}

	// A write that fails leaves nothing behind.
	if _, _, err := s.Update(ctx, "/w/ns/c", obj("ns", "c", "red"), 1, WriteOptions{Stamp: &stamp}); err == nil {
		t.Fatal("update of a missing key succeeded")
	}
	if _, err := s.Create(ctx, "/w/ns/f", obj("ns", "f", "green"), WriteOptions{Stamp: &stamp}); err == nil {
		t.Fatal("create of an existing key succeeded")
	}
	s.writes.mu.Lock()
	pend := s.writes.nPend
	s.writes.mu.Unlock()
	if pend != 0 {
		t.Fatalf("records left: %d", pend)
	}
}

func mustUpdate(t *testing.T, s *Store, ctx context.Context, key string, value []byte, rev int64) (int64, error) {
	t.Helper()
	rev, _, err := s.Update(ctx, key, value, rev, WriteOptions{})
	return rev, err
}
