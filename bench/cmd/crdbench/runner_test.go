package main

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		var d []time.Duration
		for _, x := range v {
			d = append(d, time.Duration(x)*time.Millisecond)
		}
		return d
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = i + 1
	}
	for _, tc := range []struct {
		name   string
		sorted []time.Duration
		q      float64
		want   time.Duration
	}{
		{"empty", nil, 0.5, 0},
		{"one", ms(7), 0.99, 7 * time.Millisecond},
		{"p50 of 1..100", ms(hundred...), 0.50, 50 * time.Millisecond},
		{"p99 of 1..100", ms(hundred...), 0.99, 99 * time.Millisecond},
		{"p100 of 1..100", ms(hundred...), 1, 100 * time.Millisecond},
		{"p50 of 4", ms(1, 2, 3, 4), 0.5, 2 * time.Millisecond},
	} {
		if got := percentile(tc.sorted, tc.q); got != tc.want {
			t.Errorf("%s: percentile(%v) = %v, want %v", tc.name, tc.q, got, tc.want)
		}
	}
}

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{3}, 3},
		{[]float64{5, 1, 3}, 3},
		{[]float64{4, 1, 3, 2}, 2.5},
	} {
		if got := median(tc.in); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

// TestMedianRound: load's reported phase is the round with the median
// req/s (the slower middle one of an even count), and a failed round is
// reported rather than hidden.
func TestMedianRound(t *testing.T) {
	r := func(rate float64) phase { return phase{Name: "create", PerSecond: rate} }
	if got := medianRound([]phase{r(900), r(1200), r(1000)}); got.PerSecond != 1000 {
		t.Errorf("median of 900, 1200, 1000: %v", got.PerSecond)
	}
	if got := medianRound([]phase{r(900), r(1200), r(1000), r(1100)}); got.PerSecond != 1000 {
		t.Errorf("median of four: %v", got.PerSecond)
	}
	if got := medianRound([]phase{r(1500)}); got.PerSecond != 1500 {
		t.Errorf("one round: %v", got.PerSecond)
	}
	bad := r(2000)
	bad.Errors = 3
	if got := medianRound([]phase{r(900), bad, r(1000)}); got.Errors != 3 {
		t.Errorf("a failed round was hidden: %+v", got)
	}
}

// The runner stops a phase whose first calls all fail, and one that runs
// past its time limit; both are aborted.
func TestRunBounds(t *testing.T) {
	var calls atomic.Int64
	p := run(context.Background(), "fails", 1000, 2, 10, 0, func(context.Context, int) (time.Duration, *failure) {
		calls.Add(1)
		return time.Millisecond, &failure{Error: "no"}
	})
	if !p.Aborted || p.Errors < 10 || calls.Load() > 12 || p.FirstError == nil {
		t.Errorf("failing phase: aborted %v, %d errors, %d calls", p.Aborted, p.Errors, calls.Load())
	}
	p = run(context.Background(), "slow", 1000, 1, 10, 50*time.Millisecond, func(context.Context, int) (time.Duration, *failure) {
		time.Sleep(10 * time.Millisecond)
		return 10 * time.Millisecond, nil
	})
	if !p.Aborted || p.Requests >= 1000 || p.FirstError == nil || !strings.Contains(p.FirstError.Error, "time limit") {
		t.Errorf("slow phase: aborted %v, %d requests, %+v", p.Aborted, p.Requests, p.FirstError)
	}
	p = run(context.Background(), "ok", 100, 4, 10, time.Minute, func(context.Context, int) (time.Duration, *failure) { return time.Millisecond, nil })
	if p.Aborted || p.Requests != 100 || p.Errors != 0 || p.Concurrency != 4 {
		t.Errorf("ok phase: %+v", p)
	}
}
