package store

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// breakWatch ends the cache's etcd watch as a lost quorum does, and runs
// meanwhile (with the watch down) before the cache resumes it.
func breakWatch(t *testing.T, c *Cache, meanwhile func()) {
	t.Helper()
	resumed := make(chan struct{})
	c.mu.Lock()
	c.beforeResume = func() {
		c.mu.Lock()
		c.beforeResume = nil
		c.mu.Unlock()
		meanwhile()
		close(resumed)
	}
	cancel := c.followCancel
	c.mu.Unlock()
	cancel()
	select {
	case <-resumed:
	case <-time.After(10 * time.Second):
		t.Fatal("the cache did not notice its watch ended")
	}
}

func collect(t *testing.T, w *Watcher, n int) []string {
	t.Helper()
	var got []string
	for len(got) < n {
		select {
		case <-w.Ready():
			for _, ev := range w.Next(nil, n-len(got)) {
				got = append(got, string(ev.Type)+" "+ev.Item.Name)
			}
		case <-w.Done():
			t.Fatalf("watch ended (%v) after %v", w.Err(), got)
		case <-time.After(10 * time.Second):
			t.Fatalf("only %v", got)
		}
	}
	return got
}

// TestWatchResumesWithoutGap: changes made while the etcd watch is down
// reach the open watchers, in order, once it is back; new watchers see
// them too.
func TestWatchResumesWithoutGap(t *testing.T) {
	s := startStore(t)
	ctx := context.Background()
	c := readyCache(t, s, "/r/", CacheOptions{})
	w := watchState(t, c)
	if _, err := s.Create(ctx, "/r/ns/before", obj("ns", "before", "x"), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	collect(t, w, 1)
	startRev := c.Revision()
	breakWatch(t, c, func() {
		for i := 0; i < 4; i++ {
			if _, err := s.Create(ctx, fmt.Sprintf("/r/ns/during-%d", i), obj("ns", fmt.Sprintf("during-%d", i), "x"), WriteOptions{}); err != nil {
				t.Error(err)
			}
		}
	})
	got := collect(t, w, 4)
	if fmt.Sprint(got) != "[ADDED during-0 ADDED during-1 ADDED during-2 ADDED during-3]" {
		t.Fatalf("after the watch came back: %v", got)
	}
	// A watcher resuming from before the outage replays it from history.
	r, err := c.Watch(ctx, WatchOptions{Rev: startRev})
	if err != nil || len(r.Replay) != 4 {
		t.Fatalf("resume: %v %+v", err, r)
	}
	r.Stop()
}

// TestCompactedGapEndsWatchesWith410: when etcd compacted what the cache
// missed, open watchers end with TooOld (410 to clients), the cache loads
// the new state, and resuming from an old revision is TooOld.
func TestCompactedGapEndsWatchesWith410(t *testing.T) {
	s := startStore(t)
	ctx := context.Background()
	c := readyCache(t, s, "/r/", CacheOptions{})
	w := watchState(t, c)
	old := c.Revision()
	breakWatch(t, c, func() {
		for i := 0; i < 3; i++ {
			if _, err := s.Create(ctx, fmt.Sprintf("/r/ns/x%d", i), obj("ns", fmt.Sprint(i), "x"), WriteOptions{}); err != nil {
				t.Error(err)
			}
		}
		cur, _ := s.CurrentRevision(ctx)
		if err := s.Compact(ctx, cur); err != nil {
			t.Error(err)
		}
	})
	select {
	case <-w.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the watcher was not ended")
	}
	var tooOld *TooOldError
	if !errors.As(w.Err(), &tooOld) {
		t.Fatalf("ended with %v, want a TooOldError", w.Err())
	}
	// The new state is there, and history before it is gone.
	if err := c.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	if l := c.List(ListOptions{}); len(l.Items) != 3 {
		t.Fatalf("reloaded state holds %d items", len(l.Items))
	}
	if _, err := c.Watch(ctx, WatchOptions{Rev: old}); !errors.As(err, &tooOld) {
		t.Fatalf("resuming from before the gap: %v", err)
	}
}
