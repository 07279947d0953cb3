package main

import (
	"testing"
	"time"
)

func TestDeliveryBook(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(msec int) time.Time { return t0.Add(time.Duration(msec) * time.Millisecond) }
	b := newDeliveryBook(2, 3) // 2 watchers, 3 writes
	b.wrote(0, at(0), true)
	b.wrote(1, at(100), true)
	b.wrote(2, at(200), false) // refused by the server: not expected

	// Watcher 0 gets writes 0 and 1 (1 twice), and an event of no write.
	if b.arrive(0, 0, at(5)) {
		t.Fatal("watcher 0 complete after one event")
	}
	b.arrive(0, 1, at(130))
	b.arrive(0, 1, at(140)) // duplicate
	b.arrive(0, 7, at(150)) // no such write
	b.unexpected(0)         // e.g. an ADDED event
	// Watcher 1 gets write 1 only, and the refused write's event.
	b.arrive(1, 1, at(110))
	if b.arrive(1, 2, at(210)) { // 2 of 3 writes: not complete
		t.Fatal("watcher 1 complete with 2 of 3 events")
	}
	if got := b.total.Load(); got != 4 {
		t.Fatalf("total first deliveries %d, want 4", got)
	}

	s := b.summary()
	// Expected: 2 watchers × 2 accepted writes.
	if s.Expected != 4 || s.Delivered != 3 || s.Missed != 1 {
		t.Fatalf("expected/delivered/missed = %d/%d/%d, want 4/3/1", s.Expected, s.Delivered, s.Missed)
	}
	if s.Duplicates != 1 {
		t.Fatalf("duplicates %d, want 1", s.Duplicates)
	}
	// The out-of-range seq, the ADDED event, and the refused write's event.
	if s.Unexpected != 3 {
		t.Fatalf("unexpected %d, want 3", s.Unexpected)
	}
	// Delays 5, 30, 10 ms: p50 10 (nearest rank), p99 = max = 30.
	if s.P50 != 10*time.Millisecond || s.P99 != 30*time.Millisecond || s.Max != 30*time.Millisecond {
		t.Fatalf("p50/p99/max = %v/%v/%v, want 10ms/30ms/30ms", s.P50, s.P99, s.Max)
	}
	if s.Mean != 15*time.Millisecond {
		t.Fatalf("mean %v, want 15ms", s.Mean)
	}
	if !s.Last.Equal(at(130)) {
		t.Fatalf("last delivery %v, want %v", s.Last, at(130))
	}
}

func TestDeliveryBookComplete(t *testing.T) {
	b := newDeliveryBook(1, 2)
	now := time.Now()
	b.wrote(0, now, true)
	b.wrote(1, now, true)
	if b.arrive(0, 1, now) {
		t.Fatal("complete after 1 of 2")
	}
	if !b.arrive(0, 0, now.Add(time.Millisecond)) {
		t.Fatal("not complete after 2 of 2")
	}
	s := b.summary()
	if s.Missed != 0 || s.Delivered != 2 || s.Unexpected != 0 || s.Duplicates != 0 {
		t.Fatalf("summary %+v", s)
	}
	// Nothing delivered: no percentiles, all missed.
	e := newDeliveryBook(3, 2)
	e.wrote(0, now, true)
	e.wrote(1, now, true)
	if s := e.summary(); s.Missed != 6 || s.Delivered != 0 || s.P99 != 0 {
		t.Fatalf("empty summary %+v", s)
	}
}
