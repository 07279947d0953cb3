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
