package main

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// pathsSide is the paths benchmark of one server (paths-NAME.json).
type pathsSide struct {
	res *pathsResult
	why string // why there is none
}

func loadPathsSide(dir, name string) pathsSide {
	var r pathsResult
	if err := readJSON(filepath.Join(dir, "paths-"+name+".json"), &r); err != nil {
		return pathsSide{why: "not measured"}
	}
	return pathsSide{res: &r}
}

// roundStat is the median over rounds of a round's figure f, with the
// smallest and largest. A round counts if none of rows failed in it and f
// has a figure for it (ok). If any round failed one of rows, there is no
// figure: a row is failed, never a number.
func (s pathsSide) roundStat(rows []string, f func(*pathsRound) (float64, bool)) (med, lo, hi float64, n int, why string) {
	if s.res == nil {
		return 0, 0, 0, 0, s.why
	}
	var v []float64
	failed := 0
	for i := range s.res.RoundsData {
		rd := &s.res.RoundsData[i]
		bad := false
		for _, row := range rows {
			if rd.Failed[row] != "" {
				bad = true
			}
		}
		if bad {
			failed++
			continue
		}
		if x, ok := f(rd); ok {
			v = append(v, x)
		}
	}
	switch {
	case failed > 0:
		return 0, 0, 0, 0, fmt.Sprintf("**failed** in %d of %d rounds (see Failures)", failed, len(s.res.RoundsData))
	case len(v) == 0:
		return 0, 0, 0, 0, "not reached"
	}
	return median(v), slices.Min(v), slices.Max(v), len(v), ""
}

// cell is roundStat as a table cell: the median, with the range over the
// rounds when there are several.
func (s pathsSide) cell(rows []string, f func(*pathsRound) (float64, bool), prec int, unit string) val {
	med, lo, hi, n, why := s.roundStat(rows, f)
	if why != "" {
		return none(why)
	}
	v := num(med, prec, unit)
	if n > 1 {
		v.unit += fmt.Sprintf(" (%.*f–%.*f)", prec, lo, prec, hi)
	}
	return v
}

// pathsRows is the row keys a figure depends on (pathsRun.fail's names).
func pathsRows(rows ...string) []string { return rows }

func phaseFig(get func(*pathsRound) *phase, f func(*phase) float64) func(*pathsRound) (float64, bool) {
	return func(rd *pathsRound) (float64, bool) {
		p := get(rd)
		if p == nil || p.Requests == 0 {
			return 0, false
		}
		return f(p), true
	}
}

func watchOf(rd *pathsRound, w int) *watchRun {
	return find(rd.Watches, func(x *watchRun) bool { return x.Watchers == w })
}

// pathsReport writes the section "Paths of the performance issue"
// (crdserver beside the reference) and returns its failures.
func pathsReport(dir string, p func(string, ...any)) (fails []string) {
	c, r := loadPathsSide(dir, "crdserver"), loadPathsSide(dir, "reference")
	if c.res == nil && r.res == nil {
		return nil
	}
	first := c.res
	if first == nil {
		first = r.res
	}
	sides := []struct {
		name string
		s    pathsSide
	}{{"crdserver", c}, {"reference", r}}
	var rss []string
	for _, x := range sides {
		if x.s.res != nil && len(x.s.res.RSSProcs) > 0 {
			rss = append(rss, fmt.Sprintf("%s: %s", x.name, strings.Join(x.s.res.RSSProcs, " + ")))
		}
	}
	rounds := []string{}
	for _, x := range sides {
		if x.s.res != nil {
			rounds = append(rounds, fmt.Sprintf("%s %d", x.name, len(x.s.res.RoundsData)))
		}
	}
	nObj := commas(first.N)

	p("## Paths of the performance issue\n\n")
	p("`crdbench paths`: the rows of the performance issue that the other sections do not measure, on both servers, in rounds (%s). "+
		"Each round creates CRDs of its own (fresh API groups under `%s`, labelled `%s`; the conversion CRD is `%s`, created afresh in each round) "+
		"in the namespace `%s`, and deletes them again before the next. A figure is the median over the rounds, with the smallest and largest "+
		"round in brackets; ratios are crdserver ÷ reference of the medians. A row that failed in any round shows no figure. "+
		"Every request goes over HTTPS and HTTP/2 with the admin client certificate; crdbench runs on the same cores as the servers.\n\n",
		strings.Join(rounds, ", "), pathsDomain, pathsLabel+"=<run>", webhookCRDName, first.Namespace)
	t := newTable("#", "metric", "crdserver", "reference", "ratio")
	row := func(no, metric string, cv, rv val) { t.row(no, metric, cv, rv, ratio(cv, rv)) }
	rowNR := func(no, metric string, cv, rv val) { t.row(no, metric, cv, rv, "–") }
	both := func(rows []string, f func(*pathsRound) (float64, bool), prec int, unit string) (val, val) {
		return c.cell(rows, f, prec, unit), r.cell(rows, f, prec, unit)
	}

	// 1. GETs.
	gets := func(rd *pathsRound) *phase { return rd.Gets }
	perSec := func(p *phase) float64 { return p.PerSecond }
	p50 := func(p *phase) float64 { return p.P50Ms }
	p99 := func(p *phase) float64 { return p.P99Ms }
	g := pathsRows("gets")
	cv, rv := both(g, phaseFig(gets, perSec), 0, " req/s")
	row("1", fmt.Sprintf("%s sequential GETs of single objects: throughput", commas(first.Gets)), cv, rv)
	cv, rv = both(g, phaseFig(gets, p50), 2, " ms")
	row("1", "… p50", cv, rv)
	cv, rv = both(g, phaseFig(gets, p99), 2, " ms")
	row("1", "… p99", cv, rv)

	// 2. Creates.
	creates := func(rd *pathsRound) *phase { return rd.Creates }
	cr := pathsRows("creates")
	cv, rv = both(cr, phaseFig(creates, perSec), 0, " req/s")
	row("2", fmt.Sprintf("%s creates (%s-byte bodies) from %d workers sharing one HTTP/2 connection: throughput", commas(first.Creates), commas(first.BodyBytes), first.Concurrency), cv, rv)
	cv, rv = both(cr, phaseFig(creates, p50), 2, " ms")
	row("2", "… p50", cv, rv)
	cv, rv = both(cr, phaseFig(creates, p99), 2, " ms")
	row("2", "… p99", cv, rv)

	// 3. Full list with gzip.
	l := pathsRows("list")
	lastList := func(f func(gzipList) float64) func(*pathsRound) (float64, bool) {
		return func(rd *pathsRound) (float64, bool) {
			if len(rd.Lists) == 0 {
				return 0, false
			}
			return f(rd.Lists[len(rd.Lists)-1]), true
		}
	}
	cv, rv = both(l, func(rd *pathsRound) (float64, bool) { return rd.ListMedianMs, rd.ListMedianMs > 0 }, 1, " ms")
	row("3", fmt.Sprintf("full list of %s objects, `Accept-Encoding: gzip`, until read and decompressed (median of %d per round)", nObj, first.Lists), cv, rv)
	cv, rv = both(l, lastList(func(s gzipList) float64 { return float64(s.WireBytes) / 1e6 }), 2, " MB")
	row("3", "… bytes on the wire", cv, rv)
	cv, rv = both(l, lastList(func(s gzipList) float64 { return float64(s.Bytes) / 1e6 }), 2, " MB")
	row("3", "… decompressed", cv, rv)
	enc := func(s pathsSide) string {
		if s.res == nil {
			return s.why
		}
		var e []string
		for _, rd := range s.res.RoundsData {
			for _, x := range rd.Lists {
				v := x.Encoding
				if v == "" {
					v = "identity"
				}
				if !slices.Contains(e, v) {
					e = append(e, v)
				}
			}
		}
		if len(e) == 0 {
			return "not reached"
		}
		return strings.Join(e, ", ")
	}
	t.row("3", "… Content-Encoding of the answers", enc(c), enc(r), "–")

	// 4. Paged walks.
	w := pathsRows("pages")
	lastWalk := func(f func(pageWalk) float64) func(*pathsRound) (float64, bool) {
		return func(rd *pathsRound) (float64, bool) {
			if len(rd.Walks) == 0 {
				return 0, false
			}
			return f(rd.Walks[len(rd.Walks)-1]), true
		}
	}
	cv, rv = both(w, func(rd *pathsRound) (float64, bool) { return rd.WalkMedianMs, rd.WalkMedianMs > 0 }, 1, " ms")
	row("4", fmt.Sprintf("paged list, `limit=%d`, walk of all %s objects by `continue` (gzip as above): time per walk (median of %d per round)", first.PageLimit, nObj, first.Walks), cv, rv)
	cv, rv = both(w, func(rd *pathsRound) (float64, bool) {
		var v []float64
		for _, x := range rd.Walks {
			v = append(v, x.RequestMs)
		}
		return median(v), len(v) > 0
	}, 1, " ms")
	row("4", "… of which in the pages' requests (the rest is crdbench decoding each page for its `continue`)", cv, rv)
	cv, rv = both(w, lastWalk(func(x pageWalk) float64 { return x.MaxPageMs }), 1, " ms")
	row("4", "… slowest page of a walk", cv, rv)
	cv, rv = both(w, lastWalk(func(x pageWalk) float64 { return float64(x.Pages) }), 0, "")
	rowNR("4", "… pages per walk", cv, rv)
	cv, rv = both(w, lastWalk(func(x pageWalk) float64 { return float64(x.Items) }), 0, "")
	rowNR("4", "… items checked per walk (each once)", cv, rv)

	// 5. Watch fan-out.
	for _, nw := range first.Watchers {
		key := pathsRows(fmt.Sprintf("watch-%d", nw))
		fig := func(f func(*watchRun) float64) func(*pathsRound) (float64, bool) {
			return func(rd *pathsRound) (float64, bool) {
				x := watchOf(rd, nw)
				if x == nil || x.Delivered == 0 {
					return 0, false
				}
				return f(x), true
			}
		}
		conns := (nw + first.WatchersPerConn - 1) / first.WatchersPerConn
		cv, rv = both(key, fig(func(x *watchRun) float64 { return x.P99Ms }), 1, " ms")
		row("5", fmt.Sprintf("watch fan-out, **%s watchers** (%d HTTP/2 connection(s)), %d patches one every %.0f ms: delivery delay p99", commas(nw), conns, first.WatchUpdates, first.WatchIntervalMs), cv, rv)
		cv, rv = both(key, fig(func(x *watchRun) float64 { return x.P50Ms }), 1, " ms")
		row("5", "… p50", cv, rv)
		cv, rv = both(key, fig(func(x *watchRun) float64 { return x.MaxMs }), 1, " ms")
		row("5", "… max", cv, rv)
		cv, rv = both(key, fig(func(x *watchRun) float64 { return x.WriteP50Ms }), 1, " ms")
		row("5", "… the patches themselves, p50", cv, rv)
		// Missed deliveries: shown even for failed rounds (they are the failure).
		missed := func(s pathsSide) val {
			if s.res == nil {
				return none(s.why)
			}
			tot, exp, reached := 0, 0, 0
			for i := range s.res.RoundsData {
				if x := watchOf(&s.res.RoundsData[i], nw); x != nil {
					tot += x.Missed + x.Duplicates + x.Unexpected
					exp += x.Expected
					reached++
				}
			}
			if reached == 0 {
				return none("not reached")
			}
			v := val{v: float64(tot), ok: true, unit: fmt.Sprintf(" of %s", commas(exp))}
			if tot > 0 {
				v.unit += " **(must be 0)**"
			}
			return v
		}
		rowNR("5", "… deliveries missed, duplicated or unexpected, all rounds (must be 0)", missed(c), missed(r))
	}

	// 6. Conversion webhook.
	if first.Conversion {
		convFig := func(f func(*convPaths) (float64, bool)) func(*pathsRound) (float64, bool) {
			return func(rd *pathsRound) (float64, bool) {
				if rd.Conv == nil {
					return 0, false
				}
				return f(rd.Conv)
			}
		}
		listFig := func(get func(*convPaths) *convListRun, f func(*convListRun) float64) func(*pathsRound) (float64, bool) {
			return convFig(func(cv *convPaths) (float64, bool) {
				l := get(cv)
				if l == nil {
					return 0, false
				}
				return f(l), true
			})
		}
		listMs := func(l *convListRun) float64 { return l.UntilOKMs }
		calls := func(s pathsSide, rows []string, get func(*convPaths) *convListRun) val {
			calls, _, _, _, why := s.roundStat(rows, listFig(get, func(l *convListRun) float64 { return float64(l.Webhook.Calls) }))
			if why != "" {
				return none(why)
			}
			objs, _, _, _, _ := s.roundStat(rows, listFig(get, func(l *convListRun) float64 { return float64(l.Webhook.Objects) }))
			return label(fmt.Sprintf("%s calls, %s objects", commas(int(calls)), commas(int(objs))))
		}
		setup := pathsRows("conv-setup")
		edit := pathsRows("conv-setup", "conv-edit")
		flip := pathsRows("conv-setup", "conv-edit", "conv-flip")
		firstL := func(cv *convPaths) *convListRun { return cv.First }
		warmL := func(cv *convPaths) *convListRun { return cv.Warm }
		editL := func(cv *convPaths) *convListRun {
			if cv.Edit == nil {
				return nil
			}
			return cv.Edit.List
		}
		noneL := func(cv *convPaths) *convListRun {
			if cv.ToNone == nil {
				return nil
			}
			return cv.ToNone.List
		}
		flipL := func(cv *convPaths) *convListRun {
			if cv.Flip == nil {
				return nil
			}
			return cv.Flip.List
		}
		untilOK := func(l *convListRun) float64 { return l.UntilOKMs }
		attempts := func(l *convListRun) float64 { return float64(l.Attempts) }
		changeFig := func(get func(*convPaths) *convChange, f func(*convChange) float64) func(*pathsRound) (float64, bool) {
			return convFig(func(cv *convPaths) (float64, bool) {
				ch := get(cv)
				if ch == nil {
					return 0, false
				}
				return f(ch), true
			})
		}
		editC := func(cv *convPaths) *convChange { return cv.Edit }
		flipC := func(cv *convPaths) *convChange { return cv.Flip }
		for _, x := range []struct {
			what   string
			rows   []string
			list   func(*convPaths) *convListRun
			change func(*convPaths) *convChange
			seen   string
		}{
			{"**first list as v1 through the webhook after a CRD edit** (a printer column added to v1; conversion untouched): " + nObj + " CronTabs stored in v1beta1",
				edit, editL, editC, "the Table of one object has the new column"},
			{"**first list as v1 after a flip None → Webhook** (back to exactly the conversion of before)",
				flip, flipL, flipC, "one object's v1 has `host` again"},
		} {
			c1, r1 := firstGetCell(c, x.rows, x.list), firstGetCell(r, x.rows, x.list)
			row("6", x.what+": the first GET, no retry", c1, r1)
			cv, rv = both(x.rows, listFig(x.list, untilOK), 1, " ms")
			row("6", "… until a 200 list, a 429 retried after its Retry-After as client-go does", cv, rv)
			cv, rv = both(x.rows, listFig(x.list, attempts), 0, "")
			rowNR("6", "… GETs until that 200", cv, rv)
			rowNR("6", "… webhook calls from the first GET to the 200", calls(c, x.rows, x.list), calls(r, x.rows, x.list))
			cv, rv = both(x.rows, listFig(x.list, func(l *convListRun) float64 { return l.Webhook.BusyMs }), 1, " ms")
			row("6", "… time in the example webhook's handler meanwhile (in crdbench; summed over its calls)", cv, rv)
			cv, rv = both(x.rows, changeFig(x.change, func(ch *convChange) float64 { return ch.ObservedMs }), 0, " ms")
			row("6", "… before it: the PUT sent → a GET of the CRD shows the change, Established (polled every 10 ms)", cv, rv)
			cv, rv = both(x.rows, changeFig(x.change, func(ch *convChange) float64 { return ch.ServedMs }), 0, " ms")
			row("6", "… the PUT sent → "+x.seen+" (polled every 10 ms; then the list)", cv, rv)
		}
		row("6", "(for reference) the list as v1 while the conversion was None, just before the flip: the first GET", firstGetCell(c, flip, noneL), firstGetCell(r, flip, noneL))
		cv, rv = both(flip, listFig(noneL, untilOK), 1, " ms")
		row("6", "… until a 200", cv, rv)
		cv, rv = both(setup, listFig(firstL, listMs), 1, " ms")
		row("6", "(for reference) the first list as v1 after the creates, before any edit", cv, rv)
		rowNR("6", "… webhook calls during it", calls(c, setup, firstL), calls(r, setup, firstL))
		cv, rv = both(setup, listFig(warmL, listMs), 1, " ms")
		row("6", "(for reference) the next list as v1 (warm), before the edit", cv, rv)
		rowNR("6", "… webhook calls during it", calls(c, setup, warmL), calls(r, setup, warmL))
	}
	// 7. Deleting the CRD.
	d := pathsRows("delete")
	delFig := func(f func(*crdDeletion) float64) func(*pathsRound) (float64, bool) {
		return func(rd *pathsRound) (float64, bool) {
			if rd.Delete == nil {
				return 0, false
			}
			return f(rd.Delete), true
		}
	}
	cv, rv = both(d, delFig(func(x *crdDeletion) float64 { return x.GoneMs / 1000 }), 2, " s")
	row("7", fmt.Sprintf("DELETE of a CRD holding %s objects → GET of the CRD answers 404", nObj), cv, rv)
	cv, rv = both(d, delFig(func(x *crdDeletion) float64 { return x.CollectionGoneMs / 1000 }), 2, " s")
	row("7", "… → GET of its collection answers 404", cv, rv)

	// 8. First create after Established.
	fc := pathsRows("first-create")
	cv, rv = both(fc, func(rd *pathsRound) (float64, bool) { return rd.FirstCreateMs, len(rd.FirstCreates) > 0 }, 1, " ms")
	row("8", fmt.Sprintf("first create after Established: Established seen (polled every 10 ms) → 201, retrying 404/429/503 every 10 ms (median of %d fresh CRDs per round)", first.FreshCRDs), cv, rv)
	cv, rv = both(fc, func(rd *pathsRound) (float64, bool) {
		mx := 0
		for _, x := range rd.FirstCreates {
			mx = max(mx, x.Attempts)
		}
		return float64(mx), len(rd.FirstCreates) > 0
	}, 0, "")
	rowNR("8", "… attempts until 201 (most in a round)", cv, rv)
	cv, rv = both(fc, func(rd *pathsRound) (float64, bool) {
		var v []float64
		for _, x := range rd.FirstCreates {
			v = append(v, x.EstablishedMs)
		}
		return median(v), len(v) > 0
	}, 1, " ms")
	row("8", "… (for reference) the CRD's POST → Established seen", cv, rv)

	// 9. Memory.
	m := pathsRows("rss")
	rssFig := func(f func(*pathsRound) float64) func(*pathsRound) (float64, bool) {
		return func(rd *pathsRound) (float64, bool) { return f(rd), len(rd.RSS) > 0 }
	}
	cv, rv = both(m, rssFig(func(rd *pathsRound) float64 { return rd.RSSMiB }), 1, " MiB")
	row("9", fmt.Sprintf("RSS with %s objects of %s-byte create bodies stored, %.0f s after the creates (%s)", nObj, commas(first.BodyBytes), first.RSSSettleSec, strings.Join(rss, "; ")), cv, rv)
	cv, rv = both(m, rssFig(func(rd *pathsRound) float64 { return rd.RSSBeforeMiB }), 1, " MiB")
	row("9", "… RSS just before the creates (the CRD Established; earlier rounds' objects deleted)", cv, rv)
	cv, rv = both(m, rssFig(func(rd *pathsRound) float64 { return rd.RSSMiB - rd.RSSBeforeMiB }), 1, " MiB")
	row("9", "… increase over the creates", cv, rv)
	p("%s\n", t)

	// How each row was measured.
	p("How each row was measured (numbers are the rows'):\n\n")
	p("- **1** %s GETs of single objects, one after another on one connection, spread over the %s objects.\n", commas(first.Gets), nObj)
	p("- **2, 9** Per round a fresh CRD (`PathItem`, v1, structural schema) is created and polled until Established")
	if r.res != nil && r.res.SettleSec > 0 {
		p(" (the reference then gets %.0f s more: its create handler delays creates that come sooner)", r.res.SettleSec)
	}
	p("; RSS (VmRSS of /proc/PID/status, summed) is read; then %s objects are created by %d workers over one HTTP/2 connection (one `http.Transport`, so one TLS connection multiplexed, as a client-go clientset shared by goroutines); "+
		"the first %s creates are row 2, the rest are setup; each body is exactly %s bytes (spec padded with pseudo-random hex digits, about as compressible as real data); "+
		"%.0f s after the last create the RSS is read again (row 9).\n", nObj, first.Concurrency, commas(first.Creates), commas(first.BodyBytes), first.RSSSettleSec)
	p("- **3** %d GETs of the whole collection (no limit) with `Accept-Encoding: gzip`, as Go's transport (so client-go) asks by itself; each timed from sending until the body is read and decompressed "+
		"(`compress/gzip`, as Go's transport does), then checked outside the timing: all %s items, each once.\n", first.Lists, nObj)
	p("- **4** %d walks of the same collection by `limit=%d` pages, each page's `continue` token in the next request, until a page has none; a walk is timed from its first request to its last page read, decoded and checked "+
		"(the decode is crdbench's, needed to find the token, and is in the time as in any client's); all %s items must be seen, each once, no page above the limit.\n", first.Walks, first.PageLimit, nObj)
	p("- **5** W watches of the collection (`?watch=1&resourceVersion=<a list's>`), %d per HTTP/2 connection (one `http.Transport` each, primed with one GET so the watches share its one connection; "+
		"Kubernetes' generic server allows 100 streams per connection by default, Go's 250); once every watch has answered 200, %d merge patches of `spec.seq` (each naming its write) are sent one after another, "+
		"one every %.0f ms, each to one of the stored objects; for every watcher and every write, the delay is from just before the write was sent to that watcher's decoding of the event; "+
		"after the last write crdbench waits at most %v for the last deliveries. A delivery missed, duplicated or of no write fails the row.\n",
		first.WatchersPerConn, first.WatchUpdates, first.WatchIntervalMs, watchWaitOf(first))
	if first.Conversion {
		p("- **6** `%s` (the Kubernetes documentation's CronTab: v1beta1 storage with `hostPort`, v1 with `host` and `port`) with Webhook conversion to the example webhook "+
			"(`examples/crontab-conversion`, served by crdbench on loopback over TLS, url + caBundle, counted as in the webhook conversion section); %s objects created in v1beta1; "+
			"a first list as v1 and a second (warm) one. Then the CRD is read and PUT back with a printer column added to v1 (conversion untouched); a GET of the CRD is polled every 10 ms "+
			"until it shows the new generation with the column and Established, then a GET of one object as a Table every 10 ms until the Table has the column (the server serves the edit); "+
			"then the collection is listed as v1: that first GET is the row, with no retry; if it is a 429, it is retried after its Retry-After as client-go does, and the time until a 200 list "+
			"(from the first GET) is the next row. Then the conversion is set to None the same way (served: one object's v1 has no `host`) and listed, and set back to exactly the Webhook "+
			"conversion of before (served: `host` again) and listed. Every list is a plain GET (no limit, `Accept: application/json`; Go's transport asks for gzip), and its 200 is checked: "+
			"all %s items in v1, through the webhook with `host`/`port` from each `hostPort`. Webhook calls are counted from the first GET to the 200. "+
			"The example webhook serves only `example.com`, so every round creates this same CRD afresh (deleted and gone at the end of the previous round); one that exists already is left alone and the row fails.\n",
			webhookCRDName, nObj, nObj)
	}
	p("- **7** The CRD holding the %s objects is DELETEd; from just before that request, the CRD and its collection (`?limit=1`) are each polled every 20 ms until each answers 404.\n", nObj)
	p("- **8** %d fresh CRDs per round, one after another: each is created, polled every 10 ms until Established=True, then one object is POSTed at once, and again every 10 ms while the answer is 404, 429 or 503, until 201; "+
		"the time is from seeing Established to the 201 (any other answer fails the row).\n", first.FreshCRDs)
	p("\n")

	// Round by round.
	head := []string{"server", "round", "creates/s", "list (gzip)", "walk"}
	for _, nw := range first.Watchers {
		head = append(head, "watch p99, "+commas(nw))
	}
	t = newTable(append(head, "CRD delete → collection 404", "first create", "edit → first list", "flip → first list", "RSS", "wall", "load after")...)
	f1 := func(v float64, ok bool, unit string) string {
		if !ok {
			return "–"
		}
		return fmt.Sprintf("%.1f%s", v, unit)
	}
	for _, x := range sides {
		if x.s.res == nil {
			continue
		}
		for _, rd := range x.s.res.RoundsData {
			cells := []any{x.name, rd.Round, "–"}
			if rd.Creates != nil {
				cells[2] = fmt.Sprintf("%.0f", rd.Creates.PerSecond)
			}
			cells = append(cells, f1(rd.ListMedianMs, rd.ListMedianMs > 0, " ms"), f1(rd.WalkMedianMs, rd.WalkMedianMs > 0, " ms"))
			for _, nw := range first.Watchers {
				wr := watchOf(&rd, nw)
				switch {
				case wr == nil || wr.Delivered == 0:
					cells = append(cells, "–")
				case wr.Missed > 0:
					cells = append(cells, fmt.Sprintf("%.1f ms (%d missed)", wr.P99Ms, wr.Missed))
				default:
					cells = append(cells, fmt.Sprintf("%.1f ms", wr.P99Ms))
				}
			}
			if rd.Delete != nil {
				cells = append(cells, fmt.Sprintf("%.2f s", rd.Delete.CollectionGoneMs/1000))
			} else {
				cells = append(cells, "–")
			}
			cells = append(cells, f1(rd.FirstCreateMs, len(rd.FirstCreates) > 0, " ms"))
			for _, ch := range []*convChange{convEdit(rd.Conv), convFlip(rd.Conv)} {
				switch {
				case ch == nil || ch.List == nil:
					cells = append(cells, "–")
				case ch.List.Status == 200:
					cells = append(cells, fmt.Sprintf("%.1f ms (%d calls)", ch.List.Ms, ch.List.Webhook.Calls))
				default:
					cells = append(cells, fmt.Sprintf("HTTP %d, a 200 after %.1f ms (%d calls)", ch.List.Status, ch.List.UntilOKMs, ch.List.Webhook.Calls))
				}
			}
			t.row(append(cells, f1(rd.RSSMiB, len(rd.RSS) > 0, " MiB"), fmt.Sprintf("%.0f s", rd.WallSec), fmt.Sprintf("%.2f", rd.Load1))...)
		}
	}
	p("%s\n", t)
	for _, x := range sides {
		if x.s.res == nil {
			continue
		}
		res := x.s.res
		p("- %s (%s, %s, run `%s`): load average (1/5/15 min) %s at the start, %s at the end", x.name, res.Server, res.Protocol, res.RunID, res.LoadStart, res.LoadEnd)
		if len(res.Cleanup) > 0 {
			p("; cleanup: %s", strings.Join(res.Cleanup, "; "))
		}
		p(".\n")
	}
	p("\n")

	for _, x := range sides {
		if x.s.res == nil {
			continue
		}
		if x.s.res.Error != "" {
			fails = append(fails, fmt.Sprintf("- %s paths: %s\n", x.name, x.s.res.Error))
		}
		fails = append(fails, failureLines(x.name+" paths,", x.s.res.Failures)...)
	}
	return fails
}

func convEdit(cv *convPaths) *convChange {
	if cv == nil {
		return nil
	}
	return cv.Edit
}

func convFlip(cv *convPaths) *convChange {
	if cv == nil {
		return nil
	}
	return cv.Flip
}

// watchWaitOf is how long the run waited for the last deliveries (not in
// the JSON of older runs: then the default).
func watchWaitOf(r *pathsResult) string {
	if r.WatchWaitSec > 0 {
		return fmt.Sprintf("%.0f s", r.WatchWaitSec)
	}
	return "30 s"
}

// firstGetCell is the first GET of a list after a change: its time when it
// was a 200 in every round, else what it answered.
func firstGetCell(s pathsSide, rows []string, get func(*convPaths) *convListRun) val {
	_, _, _, n, why := s.roundStat(rows, func(rd *pathsRound) (float64, bool) {
		return 0, rd.Conv != nil && get(rd.Conv) != nil
	})
	if why != "" {
		return none(why)
	}
	var oks []float64
	var other []string
	var otherMs []float64
	for i := range s.res.RoundsData {
		rd := &s.res.RoundsData[i]
		if rd.Conv == nil || get(rd.Conv) == nil {
			continue
		}
		l := get(rd.Conv)
		if l.Status == 200 {
			oks = append(oks, l.Ms)
			continue
		}
		d := fmt.Sprintf("HTTP %d", l.Status)
		if l.Message != "" {
			d += " “" + l.Message + "”"
		}
		if !slices.Contains(other, d) {
			other = append(other, d)
		}
		otherMs = append(otherMs, l.Ms)
	}
	if len(other) == 0 {
		v := num(median(oks), 1, " ms")
		if len(oks) > 1 {
			v.unit += fmt.Sprintf(" (%.1f–%.1f)", slices.Min(oks), slices.Max(oks))
		}
		return v
	}
	return none(fmt.Sprintf("%s in %d of %d rounds (answered in %.1f ms, median)", strings.Join(other, ", "), len(otherMs), n, median(otherMs)))
}

// label is a table cell of text, not a figure (no ratio).
func label(s string) val { return val{why: s} }
