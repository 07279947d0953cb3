package main

import (
	"cmp"
	"context"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// failure is the first failed request of a phase, as the server answered it.
type failure struct {
	Phase  string `json:"phase"`
	Method string `json:"method"`
	Path   string `json:"path"`
	Status int    `json:"status,omitempty"`
	Body   string `json:"body,omitempty"`
	Error  string `json:"error,omitempty"`
}

// phase summarizes one phase of requests: its throughput and latencies.
type phase struct {
	Name        string   `json:"name"`
	Concurrency int      `json:"concurrency"`
	Requests    int      `json:"requests"`
	Errors      int      `json:"errors"`
	Aborted     bool     `json:"aborted,omitempty"`
	WallSec     float64  `json:"wall_seconds"`
	PerSecond   float64  `json:"requests_per_second"`
	MeanMs      float64  `json:"mean_ms"`
	P50Ms       float64  `json:"p50_ms"`
	P90Ms       float64  `json:"p90_ms"`
	P99Ms       float64  `json:"p99_ms"`
	MaxMs       float64  `json:"max_ms"`
	FirstMs     float64  `json:"first_ms"`
	FirstError  *failure `json:"first_error,omitempty"`
}

// run is the one concurrent runner of every workload: it calls op(ctx, i)
// for i from 0 to n-1 on conc workers, op timing its own request, until all
// ran, or ctx ends or limit (if > 0) passes: the phase is then aborted. With
// giveUp > 0 it also aborts when the first giveUp calls all failed: the
// server cannot do it at all. A call that fails once ctx has ended was cut
// off by it: it is not counted.
func run(ctx context.Context, name string, n, conc, giveUp int, limit time.Duration, op func(ctx context.Context, i int) (time.Duration, *failure)) phase {
	if limit > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, limit)
		defer cancel()
	}
	lat := make([]time.Duration, n)
	done := make([]bool, n)
	var (
		mu      sync.Mutex
		errs    int
		okCount int
		first   *failure
		aborted atomic.Bool
		next    atomic.Int64
		wg      sync.WaitGroup
	)
	start := time.Now()
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !aborted.Load() {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if ctx.Err() != nil {
					aborted.Store(true)
					return
				}
				d, f := op(ctx, i)
				if f != nil && ctx.Err() != nil {
					// Cut off by the phase's time limit: not an answer.
					aborted.Store(true)
					return
				}
				mu.Lock()
				lat[i], done[i] = d, true
				if f != nil {
					errs++
					if first == nil {
						first = f
					}
					if giveUp > 0 && okCount == 0 && errs >= giveUp {
						aborted.Store(true)
					}
				} else {
					okCount++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	var got []time.Duration
	for i := range lat {
		if done[i] {
			got = append(got, lat[i])
		}
	}
	p := summarize(name, got, wall)
	p.Concurrency, p.Errors, p.Aborted, p.FirstError = conc, errs, aborted.Load(), first
	if p.Aborted && first == nil && ctx.Err() != nil {
		p.FirstError = &failure{Phase: name, Error: "phase time limit reached: " + ctx.Err().Error()}
	}
	return p
}

// request is one request of a phase: method, URL, body and the status codes
// that count as success.
type request struct {
	method, url string
	body        []byte
	want        []int
}

// phase sends n requests (req(i)) over conc workers with run, within limit
// (if > 0); after, if set, gets each answer and whether it succeeded.
func (c *client) phase(ctx context.Context, name string, n, conc int, limit time.Duration, req func(i int) request, after func(i int, ok bool, b []byte)) phase {
	return run(ctx, name, n, conc, 10, limit, func(ctx context.Context, i int) (time.Duration, *failure) {
		r := req(i)
		t0 := time.Now()
		code, b, err := c.do(ctx, r.method, r.url, r.body)
		d := time.Since(t0)
		ok := err == nil && slices.Contains(r.want, code)
		if after != nil {
			after(i, ok, b)
		}
		if !ok {
			return d, c.fail(name, r.method, r.url, code, b, err)
		}
		return d, nil
	})
}

// percentile is the nearest-rank percentile of sorted durations.
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	k := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(k, len(sorted)-1))]
}

func ms(d time.Duration) float64 { return math.Round(float64(d.Microseconds())) / 1000 }

func math3(f float64) float64 { return float64(int64(f*1000+0.5)) / 1000 }

func summarize(name string, lat []time.Duration, wall time.Duration) phase {
	p := phase{Name: name, Requests: len(lat), WallSec: wall.Seconds()}
	if len(lat) == 0 {
		return p
	}
	p.FirstMs = ms(lat[0])
	s := slices.Clone(lat)
	slices.Sort(s)
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	p.PerSecond = float64(len(s)) / wall.Seconds()
	p.MeanMs = ms(sum / time.Duration(len(s)))
	p.P50Ms, p.P90Ms, p.P99Ms, p.MaxMs = ms(percentile(s, 0.50)), ms(percentile(s, 0.90)), ms(percentile(s, 0.99)), ms(s[len(s)-1])
	return p
}

// medianRound is the phase with the median req/s of rounds (of an even
// number, the slower of the middle two), an aborted or failed one if any
// round was: a figure is only reported when every round succeeded.
func medianRound(rounds []phase) phase {
	for _, p := range rounds {
		if p.Aborted || p.Errors > 0 {
			return p
		}
	}
	sorted := slices.Clone(rounds)
	slices.SortFunc(sorted, func(a, b phase) int { return cmp.Compare(a.PerSecond, b.PerSecond) })
	return sorted[(len(sorted)-1)/2]
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// find is the first element of s that match holds of, or nil.
func find[T any](s []T, match func(*T) bool) *T {
	for i := range s {
		if match(&s[i]) {
			return &s[i]
		}
	}
	return nil
}

// pollUntil checks cond every interval until it holds (true) or timeout passes.
func pollUntil(timeout, interval time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(interval)
	}
	return true
}
