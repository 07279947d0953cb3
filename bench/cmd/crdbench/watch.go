package main

import (
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
	Watchers    int            `json:"watchers"`
	PerConn     int            `json:"watchers_per_connection"`
	Conns       int            `json:"connections_dialled"`
	Updates     int            `json:"updates"`
	IntervalMs  float64        `json:"update_interval_ms"`
	OpenMs      float64        `json:"open_ms"` // all W watches answered 200
	WritesOK    int            `json:"writes_ok"`
	WriteP50Ms  float64        `json:"write_p50_ms"`
	WriteP99Ms  float64        `json:"write_p99_ms"`
	Expected    int            `json:"deliveries_expected"`
	Delivered   int            `json:"deliveries"`
	Missed      int            `json:"missed"`
	Duplicates  int            `json:"duplicates"`
	Unexpected  int            `json:"unexpected_events"`
	P50Ms       float64        `json:"p50_ms"`
	P99Ms       float64        `json:"p99_ms"`
	MaxMs       float64        `json:"max_ms"`
	MeanMs      float64        `json:"mean_ms"`
	SpanMs      float64        `json:"span_ms"` // first write sent → last delivery
	WatchErrors int            `json:"watch_errors"`
	Protocols   map[string]int `json:"protocols,omitempty"`
	Encodings   map[string]int `json:"content_encodings,omitempty"`
}

// deliveryBook is the watch fan-out's bookkeeping: when each write was
// sent, and when each watcher got each write's event. Each watcher records
// into its own row only (arrive is called by that watcher's goroutine), the
// writer into sent and ok; summary is called once all of them stopped.
type deliveryBook struct {
	sent    []time.Time
	ok      []bool
	arrived [][]time.Time
	got     []int // per watcher: first deliveries
	dups    []int
	unexp   []int
	total   atomic.Int64 // first deliveries, all watchers
}

func newDeliveryBook(watchers, writes int) *deliveryBook {
	b := &deliveryBook{sent: make([]time.Time, writes), ok: make([]bool, writes), arrived: make([][]time.Time, watchers),
		got: make([]int, watchers), dups: make([]int, watchers), unexp: make([]int, watchers)}
	for w := range b.arrived {
		b.arrived[w] = make([]time.Time, writes)
	}
	return b
}

// wrote records write k: sent at t, and whether the server accepted it.
func (b *deliveryBook) wrote(k int, t time.Time, ok bool) { b.sent[k], b.ok[k] = t, ok }

// arrive records that watcher w got write k's event at t. It returns
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

// unexpected counts an event of watcher w that belongs to no write.
func (b *deliveryBook) unexpected(w int) { b.unexp[w]++ }

// deliveries is the summary of a deliveryBook: over every watcher and every
// accepted write, the delay from the write's sending to the event's arrival.
type deliveries struct {
	Expected, Delivered, Missed, Duplicates, Unexpected int
	P50, P99, Max, Mean                                 time.Duration
	Last                                                time.Time // the last delivery
}

func (b *deliveryBook) summary() deliveries {
	var d deliveries
	var lat []time.Duration
	for w := range b.arrived {
		d.Duplicates += b.dups[w]
		d.Unexpected += b.unexp[w]
		for k, at := range b.arrived[w] {
			if !b.ok[k] {
				// A write the server refused (or that timed out): its
				// event is not expected, but counted if it came.
				if !at.IsZero() {
					d.Unexpected++
				}
				continue
			}
			d.Expected++
			if at.IsZero() {
				d.Missed++
				continue
			}
			d.Delivered++
			lat = append(lat, at.Sub(b.sent[k]))
			if at.After(d.Last) {
				d.Last = at
			}
		}
	}
	if len(lat) == 0 {
		return d
	}
	slices.Sort(lat)
	var sum time.Duration
	for _, x := range lat {
		sum += x
	}
	d.P50, d.P99, d.Max, d.Mean = percentile(lat, 0.5), percentile(lat, 0.99), lat[len(lat)-1], sum/time.Duration(len(lat))
	return d
}

// watchEvent is what a watcher reads of each event.
type watchEvent struct {
	Type   string `json:"type"`
	Object struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Spec struct {
			Seq *int64 `json:"seq"`
		} `json:"spec"`
		Message string `json:"message"` // of an ERROR event's Status
	} `json:"object"`
}

// watchFanOut opens w watches of coll from a list's resourceVersion,
// perConn per HTTP/2 connection, then sends the updates and books every
// delivery. Writes carry spec.seq = seqBase + k, so that every event names
// its write.
func (p *pathsRun) watchFanOut(round, set int, coll string, w int, itemName func(int) string) (watchRun, *failure) {
	wr := watchRun{Watchers: w, PerConn: p.WatchersPerConn, Updates: p.WatchUpdates, IntervalMs: ms(p.interval),
		Protocols: map[string]int{}, Encodings: map[string]int{}}
	seqBase := int64(round*1_000_000 + (set+1)*100_000)
	fail := func(format string, a ...any) (watchRun, *failure) {
		return wr, &failure{Method: http.MethodGet, Path: strings.TrimPrefix(coll, p.base) + "?watch=1", Error: fmt.Sprintf(format, a...)}
	}
	// Everything of this measurement ends by this deadline.
	limit := p.waitFor + time.Duration(p.WatchUpdates)*(p.interval+10*time.Second) + p.watchWait + 30*time.Second
	ctx, cancel := context.WithTimeout(p.ctx, limit)
	defer cancel()

	// One client (one transport, one HTTP/2 connection) per perConn
	// watchers, each primed with a small list so that its connection is
	// up before the watches share it.
	nconn := (w + p.WatchersPerConn - 1) / p.WatchersPerConn
	var dials atomic.Int64
	clients := make([]*client, nconn)
	for j := range clients {
		cl, err := newClient(p.c.u, p.c.tls, 1)
		if err != nil {
			return fail("client: %v", err)
		}
		cl.Timeout = 0 // watches are bounded by ctx
		if tr, ok := cl.Transport.(*http.Transport); ok {
			dial := tr.DialContext
			tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
				dials.Add(1)
				return dial(ctx, network, addr)
			}
			defer tr.CloseIdleConnections()
		}
		pc := &client{hc: cl, base: p.base}
		clients[j] = pc
		pctx, pcancel := context.WithTimeout(ctx, 30*time.Second)
		code, b, err := pc.do(pctx, http.MethodGet, coll+"?limit=1", nil)
		pcancel()
		if err != nil || code != http.StatusOK {
			return fail("priming connection %d: HTTP %d %v %s", j+1, code, err, truncate(b, 300))
		}
	}
	// The resourceVersion to watch from: a list's.
	code, b, err := p.do(http.MethodGet, coll+"?limit=1", nil, 30*time.Second)
	var lm struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	if err != nil || code != http.StatusOK || json.Unmarshal(b, &lm) != nil || lm.Metadata.ResourceVersion == "" {
		return fail("list for the resourceVersion: HTTP %d %v %s", code, err, truncate(b, 300))
	}
	watchURL := coll + "?watch=1&resourceVersion=" + url.QueryEscape(lm.Metadata.ResourceVersion) + "&timeoutSeconds=" +
		strconv.Itoa(int(limit.Seconds())+60)

	book := newDeliveryBook(w, p.WatchUpdates)
	var (
		mu       sync.Mutex
		firstErr string
		werrs    int
		wg       sync.WaitGroup
	)
	watchErr := func(s string) {
		mu.Lock()
		werrs++
		if firstErr == "" {
			firstErr = s
		}
		mu.Unlock()
	}
	opened := make(chan error, w)
	t0 := time.Now()
	for i := range w {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wctx, wcancel := context.WithCancel(ctx)
			defer wcancel()
			resp, err := clients[i/p.WatchersPerConn].send(wctx, http.MethodGet, watchURL, nil)
			if err != nil {
				opened <- err
				return
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b, _ := io.ReadAll(io.LimitReader(resp.Body, 2000))
				opened <- fmt.Errorf("watch %d: HTTP %d %s", i, resp.StatusCode, truncate(b, 500))
				return
			}
			mu.Lock()
			wr.Protocols[resp.Proto]++
			enc := resp.Header.Get("Content-Encoding")
			if resp.Uncompressed {
				enc = "gzip (decompressed by Go's transport)"
			}
			if enc == "" {
				enc = "identity"
			}
			wr.Encodings[enc]++
			mu.Unlock()
			opened <- nil
			dec := json.NewDecoder(resp.Body)
			for events := 0; ; events++ {
				if events >= 10*p.WatchUpdates+1000 {
					watchErr(fmt.Sprintf("watch %d: more than %d events", i, events))
					return
				}
				var ev watchEvent
				if err := dec.Decode(&ev); err != nil {
					if wctx.Err() == nil {
						watchErr(fmt.Sprintf("watch %d ended: %v", i, err))
					}
					return
				}
				now := time.Now()
				switch {
				case ev.Type == "BOOKMARK":
				case ev.Type == "ERROR":
					watchErr(fmt.Sprintf("watch %d: ERROR event: %s", i, ev.Object.Message))
					return
				case ev.Type != "MODIFIED" || ev.Object.Spec.Seq == nil:
					book.unexpected(i)
				default:
					if book.arrive(i, int(*ev.Object.Spec.Seq-seqBase), now) {
						return // every write seen: this watcher is done
					}
				}
			}
		}()
	}
	stopAll := func() {
		cancel()
		wg.Wait()
	}
	// All watches answered, or give up.
	openDeadline := time.NewTimer(p.waitFor)
	var openErr error
	for range w {
		select {
		case err := <-opened:
			if err != nil && openErr == nil {
				openErr = err
			}
		case <-openDeadline.C:
			if openErr == nil {
				openErr = fmt.Errorf("not all %d watches answered within %v", w, p.waitFor)
			}
		case <-ctx.Done():
			if openErr == nil {
				openErr = ctx.Err()
			}
		}
		if openErr != nil {
			break
		}
	}
	openDeadline.Stop()
	wr.OpenMs = ms(time.Since(t0))
	if openErr != nil {
		stopAll()
		wr.Conns = int(dials.Load())
		return fail("opening the watches: %v", openErr)
	}

	// The writes: sequential merge patches, one every interval.
	log.Printf("  %d watches open in %.0f ms over %d connection(s); %d patches, one every %v", w, wr.OpenMs, dials.Load(), p.WatchUpdates, p.interval)
	var wlat []time.Duration
	var wfail *failure
	start := time.Now()
	for k := 0; k < p.WatchUpdates && ctx.Err() == nil; k++ {
		if d := time.Until(start.Add(time.Duration(k) * p.interval)); d > 0 {
			time.Sleep(d)
		}
		target := coll + "/" + itemName(k%p.N)
		body := []byte(`{"spec":{"seq":` + strconv.FormatInt(seqBase+int64(k), 10) + `}}`)
		wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
		ts := time.Now()
		code, b, err := p.c.do(wctx, http.MethodPatch, target, body, "Content-Type", "application/merge-patch+json")
		d := time.Since(ts)
		wcancel()
		ok := err == nil && code == http.StatusOK
		book.wrote(k, ts, ok)
		if ok {
			wlat = append(wlat, d)
			wr.WritesOK++
		} else if wfail == nil {
			wfail = p.httpFail(http.MethodPatch, target, code, b, err)
		}
	}
	lastWrite := time.Now()
	// The last deliveries.
	want := int64(w * wr.WritesOK)
	for i := 0; i < 1_000_000 && book.total.Load() < want && time.Since(lastWrite) < p.watchWait && ctx.Err() == nil; i++ {
		time.Sleep(5 * time.Millisecond)
	}
	stopAll()
	wr.Conns = int(dials.Load())
	sum := book.summary()
	wr.Expected, wr.Delivered, wr.Missed, wr.Duplicates, wr.Unexpected = sum.Expected, sum.Delivered, sum.Missed, sum.Duplicates, sum.Unexpected
	wr.P50Ms, wr.P99Ms, wr.MaxMs, wr.MeanMs = ms(sum.P50), ms(sum.P99), ms(sum.Max), ms(sum.Mean)
	if !sum.Last.IsZero() {
		wr.SpanMs = ms(sum.Last.Sub(start))
	}
	slices.Sort(wlat)
	wr.WriteP50Ms, wr.WriteP99Ms = ms(percentile(wlat, 0.5)), ms(percentile(wlat, 0.99))
	wr.WatchErrors = werrs
	log.Printf("  %d of %d deliveries, %d missed, p50 %.1f ms, p99 %.1f ms, max %.1f ms", wr.Delivered, wr.Expected, wr.Missed, wr.P50Ms, wr.P99Ms, wr.MaxMs)
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
