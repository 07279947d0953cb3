package main

import "testing"

func TestShouldRelease(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		heap, live uint64
		want       bool
	}{
		{heap: 30 * mib, live: 5 * mib, want: false},    // little to give back
		{heap: 250 * mib, live: 120 * mib, want: false}, // a busy heap between collections
		{heap: 160 * mib, live: 20 * mib, want: true},   // a heap that shrank
		{heap: 96 * mib, live: 32 * mib, want: false},   // the thresholds
		{heap: 96*mib + 1, live: 32 * mib, want: true},
		{heap: 70 * mib, live: 10 * mib, want: false},
	} {
		if got := shouldRelease(c.heap, c.live); got != c.want {
			t.Errorf("shouldRelease(%d MiB heap, %d MiB live) = %v", c.heap/mib, c.live/mib, got)
		}
	}
}

// TestReleaser: the heap is given back after a burst of work once a
// second is quiet, not during the burst, not while idle, and not after a
// burst that left nothing to give back.
func TestReleaser(t *testing.T) {
	const mib = 1 << 20
	r := releaser{last: 100 * mib, released: 100 * mib}
	for i, c := range []struct {
		heap, live, allocs uint64
		want               bool
	}{
		{heap: 40 * mib, live: 20 * mib, allocs: 101 * mib, want: false}, // idle
		{heap: 50 * mib, live: 20 * mib, allocs: 120 * mib, want: false}, // busy
		{heap: 60 * mib, live: 30 * mib, allocs: 150 * mib, want: false}, // busy, a burst's worth
		{heap: 60 * mib, live: 30 * mib, allocs: 151 * mib, want: true},  // quiet after the burst
		{heap: 31 * mib, live: 30 * mib, allocs: 152 * mib, want: false}, // given back: idle
		{heap: 70 * mib, live: 30 * mib, allocs: 190 * mib, want: false}, // another burst
		{heap: 40 * mib, live: 30 * mib, allocs: 191 * mib, want: false}, // quiet, but under 16 MiB to give
		{heap: 200 * mib, live: 30 * mib, allocs: 260 * mib, want: true}, // busy, but the heap shrank
	} {
		if got := r.release(c.heap, c.live, c.allocs); got != c.want {
			t.Errorf("second %d: release(%d MiB heap, %d MiB live, %d MiB allocated) = %v", i, c.heap/mib, c.live/mib, c.allocs/mib, got)
		}
	}
}

// TestGCPercent: GOGC 100 while little is live, then the room between
// collections stays gcRoom, and never below a quarter of what is live.
func TestGCPercent(t *testing.T) {
	for _, c := range []struct {
		live uint64
		want int
	}{{0, 100}, {64 << 20, 100}, {128 << 20, 100}, {256 << 20, 50}, {512 << 20, 25}, {4 << 30, 25}} {
		if got := gcPercent(c.live); got != c.want {
			t.Errorf("gcPercent(%d MiB) = %d, want %d", c.live>>20, got, c.want)
		}
	}
}
