package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The watch fan-out of crdbench paths: W watches of one collection, then a
// stream of writes, and for every watcher and every write the delay from
// the write being sent to the event's arrival.

// watchRun is one watch fan-out measurement.
type watchRun struct {
	Watchers   int     `json:"watchers"`
	PerConn    int     `json:"watchers_per_connection"`
	Conns      int     `json:"connections_dialled"`
	Updates    int     `json:"updates"`
	IntervalMs float64 `json:"update_interval_ms"`
	OpenMs     float64 `json:"open_ms"` // all W watches answered 200
	WritesOK   int     `json:"writes_ok"`
	WriteP50Ms float64 `json:"write_p50_ms"`
	WriteP99Ms float64 `json:"write_p99_ms"`
	deliveryFigures
	SpanMs      float64        `json:"span_ms"` // first write sent → last delivery
	WatchErrors int            `json:"watch_errors"`
	Protocols   map[string]int `json:"protocols,omitempty"`
	Encodings   map[string]int `json:"content_encodings,omitempty"`
}

// deliveryBook is when each write was sent (and whether the server took
// it), and when each watcher got each write's event. A watcher writes
// only its own row; summary is called once all of them stopped.
type deliveryBook struct {
	sent             []time.Time
	ok               []bool
	arrived          [][]time.Time
	got, dups, unexp []int        // per watcher
	total            atomic.Int64 // first deliveries, all watchers
}

func newDeliveryBook(watchers, writes int) *deliveryBook {
	b := &deliveryBook{sent: make([]time.Time, writes), ok: make([]bool, writes), arrived: make([][]time.Time, watchers),
		got: make([]int, watchers), dups: make([]int, watchers), unexp: make([]int, watchers)}
	for w := range b.arrived {
		b.arrived[w] = make([]time.Time, writes)
	}
	return b
}

func (b *deliveryBook) wrote(k int, t time.Time, ok bool) { b.sent[k], b.ok[k] = t, ok }

// unexpected counts an event of watcher w that belongs to no write.
func (b *deliveryBook) unexpected(w int) { b.unexp[w]++ }

// arrive records that watcher w got write k's event at t, and returns
// whether w now has an event of every write.
func (b *deliveryBook) arrive(w, k int, t time.Time) bool {
	switch {
	case k < 0 || k >= len(b.sent):
		b.unexp[w]++
	case !b.arrived[w][k].IsZero():
		b.dups[w]++
	default:
		b.arrived[w][k] = t
		b.got[w]++
		b.total.Add(1)
	}
	return b.got[w] == len(b.sent)
}

// deliveries is a deliveryBook's summary: over every watcher and every
// accepted write, the delay from the write's sending to the event.
type deliveries struct {
	Expected, Delivered, Missed, Duplicates, Unexpected int
	P50, P99, Max, Mean                                 time.Duration
	Last                                                time.Time
}

// deliveryFigures are a deliveries' figures as the JSON results give
// them (every watch measurement has them).
type deliveryFigures struct {
	Expected   int     `json:"deliveries_expected"`
	Delivered  int     `json:"deliveries"`
	Missed     int     `json:"missed"`
	Duplicates int     `json:"duplicates"`
	Unexpected int     `json:"unexpected_events"`
	P50Ms      float64 `json:"p50_ms"`
	P99Ms      float64 `json:"p99_ms"`
	MaxMs      float64 `json:"max_ms"`
	MeanMs     float64 `json:"mean_ms"`
}

func (d deliveries) figures() deliveryFigures {
	return deliveryFigures{Expected: d.Expected, Delivered: d.Delivered, Missed: d.Missed, Duplicates: d.Duplicates, Unexpected: d.Unexpected,
		P50Ms: ms(d.P50), P99Ms: ms(d.P99), MaxMs: ms(d.Max), MeanMs: ms(d.Mean)}
}

func (b *deliveryBook) summary() deliveries {
	var d deliveries
	var lat []time.Duration
	var sum time.Duration
	for w := range b.arrived {
		d.Duplicates += b.dups[w]
		d.Unexpected += b.unexp[w]
		for k, at := range b.arrived[w] {
			switch {
			case !b.ok[k]: // refused or timed out: its event is not expected
				if !at.IsZero() {
					d.Unexpected++
				}
			case at.IsZero():
				d.Expected++
				d.Missed++
			default:
				d.Expected++
				d.Delivered++
				lat, sum = append(lat, at.Sub(b.sent[k])), sum+at.Sub(b.sent[k])
				if at.After(d.Last) {
					d.Last = at
				}
			}
		}
	}
	if len(lat) > 0 {
		slices.Sort(lat)
		d.P50, d.P99, d.Max, d.Mean = percentile(lat, 0.5), percentile(lat, 0.99), lat[len(lat)-1], sum/time.Duration(len(lat))
	}
	return d
}

// watchFanOut opens w watches of coll from a list's resourceVersion,
// WatchersPerConn per HTTP/2 connection, then sends the patches and books
// every delivery. Patch k sets spec.seq = seqBase + k: every event names
// its write.
func (p *pathsRun) watchFanOut(round, set int, coll string, w int, itemName func(int) string) (watchRun, *failure) {
	wr := watchRun{Watchers: w, PerConn: p.WatchersPerConn, Updates: p.WatchUpdates, IntervalMs: ms(p.interval),
		Protocols: map[string]int{}, Encodings: map[string]int{}}
	seqBase := int64(round*1_000_000 + (set+1)*100_000)
	fail := func(format string, a ...any) (watchRun, *failure) {
		return wr, p.failf(http.MethodGet, coll+"?watch=1", 0, format, a...)
	}
	// Everything of this measurement ends by this deadline.
	limit := p.waitFor + time.Duration(p.WatchUpdates)*(p.interval+10*time.Second) + p.watchWait + 30*time.Second
	ctx, cancel := context.WithTimeout(p.ctx, limit)
	defer cancel()

	// One client (one transport, one HTTP/2 connection) per WatchersPerConn
	// watchers, each primed with a small list so that its connection is
	// up before the watches share it; the last list's resourceVersion is
	// where the watches start.
	var dials atomic.Int64
	clients := make([]*client, (w+p.WatchersPerConn-1)/p.WatchersPerConn)
	var rv string
	for j := range clients {
		hc, err := newClient(p.c.u, p.c.tls, 1)
		if err != nil {
			return fail("client: %v", err)
		}
		hc.Timeout = 0 // watches are bounded by ctx
		tr := hc.Transport.(*http.Transport)
		dial := tr.DialContext
		tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials.Add(1)
			return dial(ctx, network, addr)
		}
		defer tr.CloseIdleConnections()
		clients[j] = &client{hc: hc, base: p.base}
		var lm struct {
			Metadata struct{ ResourceVersion string }
		}
		if code, err := clients[j].getJSON(ctx, coll+"?limit=1", "application/json", &lm); err != nil || code != http.StatusOK || lm.Metadata.ResourceVersion == "" {
			return fail("priming connection %d: HTTP %d %v", j+1, code, err)
		}
		rv = lm.Metadata.ResourceVersion
	}
	watchURL := coll + "?watch=1&resourceVersion=" + url.QueryEscape(rv) + "&timeoutSeconds=" + strconv.Itoa(int(limit.Seconds())+60)

	book := newDeliveryBook(w, p.WatchUpdates)
	var (
		mu                sync.Mutex
		firstErr, openErr string
		werrs             int
		opened            atomic.Int64
		allOpenAt         atomic.Value
		wg                sync.WaitGroup
	)
	watchErr := func(open bool, s string) {
		mu.Lock()
		defer mu.Unlock()
		if open {
			openErr = cmp.Or(openErr, s)
			return
		}
		werrs++
		firstErr = cmp.Or(firstErr, s)
	}
	t0 := time.Now()
	for i := range w {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := clients[i/p.WatchersPerConn].send(ctx, http.MethodGet, watchURL, nil)
			if err != nil {
				watchErr(true, err.Error())
				return
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b, _ := io.ReadAll(io.LimitReader(resp.Body, 2000))
				watchErr(true, fmt.Sprintf("watch %d: HTTP %d %s", i, resp.StatusCode, truncate(b, 500)))
				return
			}
			enc := cmp.Or(resp.Header.Get("Content-Encoding"), "identity")
			if resp.Uncompressed {
				enc = "gzip (decompressed by Go's transport)"
			}
			mu.Lock()
			wr.Protocols[resp.Proto]++
			wr.Encodings[enc]++
			mu.Unlock()
			if opened.Add(1) == int64(w) {
				allOpenAt.Store(time.Now())
			}
			dec := json.NewDecoder(resp.Body)
			for events := 0; events < 10*p.WatchUpdates+1000; events++ {
				var ev struct {
					Type   string
					Object struct {
						Spec    struct{ Seq *int64 }
						Message string // of an ERROR event's Status
					}
				}
				if err := dec.Decode(&ev); err != nil {
					if ctx.Err() == nil {
						watchErr(false, fmt.Sprintf("watch %d ended: %v", i, err))
					}
					return
				}
				switch {
				case ev.Type == "BOOKMARK":
				case ev.Type == "ERROR":
					watchErr(false, fmt.Sprintf("watch %d: ERROR event: %s", i, ev.Object.Message))
					return
				case ev.Type != "MODIFIED" || ev.Object.Spec.Seq == nil:
					book.unexpected(i)
				case book.arrive(i, int(*ev.Object.Spec.Seq-seqBase), time.Now()):
					return // every write seen: this watcher is done
				}
			}
			watchErr(false, fmt.Sprintf("watch %d: more than %d events", i, 10*p.WatchUpdates+1000))
		}()
	}
	stopAll := func() {
		cancel()
		wg.Wait()
		wr.Conns = int(dials.Load())
	}
	// All watches answered, or give up.
	allOpen := pollUntil(p.waitFor, time.Millisecond, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return openErr != "" || opened.Load() == int64(w) || ctx.Err() != nil
	})
	if at, ok := allOpenAt.Load().(time.Time); ok {
		wr.OpenMs = ms(at.Sub(t0))
	} else {
		wr.OpenMs = ms(time.Since(t0))
	}
	if openErr != "" || !allOpen || ctx.Err() != nil {
		stopAll()
		return fail("opening the watches: %s", cmp.Or(openErr, fmt.Sprintf("not all %d watches answered within %v", w, p.waitFor)))
	}

	// The writes: sequential merge patches, one every interval (profile.sh
	// waits for "watches open" in the log).
	log.Printf("  %d watches open in %.0f ms over %d connection(s); %d patches, one every %v", w, wr.OpenMs, dials.Load(), p.WatchUpdates, p.interval)
	var wlat []time.Duration
	var wfail *failure
	start := time.Now()
	for k := 0; k < p.WatchUpdates && ctx.Err() == nil; k++ {
		time.Sleep(time.Until(start.Add(time.Duration(k) * p.interval)))
		target := coll + "/" + itemName(k%p.N)
		wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
		ts := time.Now()
		code, b, err := p.c.do(wctx, http.MethodPatch, target, []byte(`{"spec":{"seq":`+strconv.FormatInt(seqBase+int64(k), 10)+`}}`), "Content-Type", "application/merge-patch+json")
		d := time.Since(ts)
		wcancel()
		ok := err == nil && code == http.StatusOK
		if book.wrote(k, ts, ok); ok {
			wlat = append(wlat, d)
			wr.WritesOK++
		} else if wfail == nil {
			wfail = p.httpFail(http.MethodPatch, target, code, b, err)
		}
	}
	// The last deliveries.
	pollUntil(p.watchWait, 5*time.Millisecond, func() bool { return book.total.Load() >= int64(w*wr.WritesOK) || ctx.Err() != nil })
	stopAll()
	sum := book.summary()
	wr.deliveryFigures = sum.figures()
	if !sum.Last.IsZero() {
		wr.SpanMs = ms(sum.Last.Sub(start))
	}
	log.Printf("  %d of %d deliveries, %d missed, p50 %.1f ms, p99 %.1f ms, max %.1f ms", wr.Delivered, wr.Expected, wr.Missed, wr.P50Ms, wr.P99Ms, wr.MaxMs)
	slices.Sort(wlat)
	wr.WriteP50Ms, wr.WriteP99Ms, wr.WatchErrors = ms(percentile(wlat, 0.5)), ms(percentile(wlat, 0.99)), werrs
	switch {
	case wfail != nil:
		wfail.Error = strings.TrimSpace(fmt.Sprintf("%d of %d patches failed; first: %s", p.WatchUpdates-wr.WritesOK, p.WatchUpdates, wfail.Error))
		return wr, wfail
	case wr.Missed > 0 || wr.Duplicates > 0 || wr.Unexpected > 0:
		return fail("%d of %d deliveries missed (waited %v after the last patch), %d duplicates, %d unexpected events; %d watch errors, first: %s",
			wr.Missed, wr.Expected, p.watchWait, wr.Duplicates, wr.Unexpected, werrs, firstErr)
	case werrs > 0:
		return fail("%d watch errors; first: %s", werrs, firstErr)
	}
	return wr, nil
}
