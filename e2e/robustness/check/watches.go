package check

import (
	"fmt"
	"net/http"
	"strconv"
)

// checkWatches checks every logical watch against the events etcd's
// changes make for its scope.
func checkWatches(h *History, t *Truth, a *acks, rp *reporter) {
	for i := range h.Watches {
		checkWatch(&h.Watches[i], t, a, rp)
	}
}

type delivered struct {
	ev   WatchEvent
	conn int
}

func checkWatch(w *Watch, t *Truth, a *acks, rp *reporter) {
	if len(w.Conns) == 0 {
		return
	}
	what := fmt.Sprintf("watch %d (client %d, %s) of %s", w.ID, w.Client, w.Mode, w.Scope)
	c0 := &w.Conns[0]
	var start int64
	first := 0 // the first event of conn 0 after the initial ones
	if w.Mode == WatchList {
		var ok bool
		if start, first, ok = checkInitial(w, t, a, rp, what); !ok {
			return
		}
	} else {
		var err error
		if start, err = strconv.ParseInt(c0.RV, 10, 64); err != nil || start <= 0 {
			rp.add(Reliable, "%s: starts from resourceVersion %q", what, c0.RV)
			return
		}
	}

	covered := start   // every event up to it was delivered
	lastEvent := start // the revision of the last event delivered
	lastBookmark := int64(-1)
	if w.Mode == WatchList {
		lastBookmark = start // the initial-events-end bookmark
	}
	var evs []delivered
	seen := map[string]bool{}
	for ci := range w.Conns {
		c := &w.Conns[ci]
		if c.Undecodable {
			rp.add(Acknowledged, "%s: conn %d carried something that is not a watch event (%s)", what, ci, c.Err)
		}
		from := 0
		if ci == 0 {
			from = first
		}
		for _, e := range c.Events[from:] {
			if e.Type == "BOOKMARK" {
				if e.Obj.Rev < lastEvent {
					rp.add(Bookmarkable, "%s: a bookmark at %d after an event at %d", what, e.Obj.Rev, lastEvent)
				}
				lastBookmark = max(lastBookmark, e.Obj.Rev)
				covered = max(covered, e.Obj.Rev)
				continue
			}
			id := fmt.Sprintf("%s@%d", e.Obj.Key, e.Obj.Rev)
			switch {
			case seen[id]:
				rp.add(Unique, "%s: %s %s delivered twice (conn %d)", what, e.Type, e.Obj, ci)
				continue
			case e.Obj.Rev <= lastBookmark:
				rp.add(Bookmarkable, "%s: %s %s after a bookmark at %d (conn %d)", what, e.Type, e.Obj, lastBookmark, ci)
			case e.Obj.Rev < lastEvent || e.Obj.Rev == start:
				rp.add(Ordered, "%s: %s %s after revision %d (conn %d)", what, e.Type, e.Obj, lastEvent, ci)
			}
			seen[id] = true
			evs = append(evs, delivered{ev: e, conn: ci})
			lastEvent = max(lastEvent, e.Obj.Rev)
			covered = max(covered, e.Obj.Rev)
		}
		if c.Code == http.StatusGone && !t.Compacted(covered+1, c.End) {
			rp.add(Gone, "%s: conn %d (from rv %s) ended with 410 (%s) at revision %d, which etcd had not compacted", what, ci, c.RV, c.Reason, covered)
		}
	}

	to := min(covered, t.End)
	want := t.Events(w.Scope, start, to)
	wantBy := map[string]WatchEvent{}
	revs := map[int64]bool{}
	for _, e := range want {
		wantBy[fmt.Sprintf("%s@%d", e.Obj.Key, e.Obj.Rev)] = e
	}
	gotBy := map[string]delivered{}
	for _, d := range evs {
		if d.ev.Obj.Rev > to {
			continue
		}
		id := fmt.Sprintf("%s@%d", d.ev.Obj.Key, d.ev.Obj.Rev)
		gotBy[id] = d
		revs[d.ev.Obj.Rev] = true
		x, ok := wantBy[id]
		switch {
		case !ok:
			// A change etcd made that the watch's scope (resource,
			// namespace, field or label selector) excludes is a filtering
			// fault, whichever part of the scope excludes it.
			if _, changed := t.WrittenAt(d.ev.Obj.Key, d.ev.Obj.Rev); changed {
				rp.add(Filtered, "%s: %s %s, a change its scope excludes (conn %d)", what, d.ev.Type, d.ev.Obj, d.conn)
			} else {
				rp.add(Acknowledged, "%s: %s %s, a change etcd never made (conn %d)", what, d.ev.Type, d.ev.Obj, d.conn)
			}
		case x.Type != d.ev.Type:
			rp.add(Filtered, "%s: %s %s where etcd's change makes it %s (conn %d)", what, d.ev.Type, d.ev.Obj, x.Type, d.conn)
		case x.Obj != d.ev.Obj:
			rp.add(Acknowledged, "%s: %s %s where etcd's change is %s (conn %d)", what, d.ev.Type, d.ev.Obj, x.Obj, d.conn)
		}
	}
	for _, e := range want {
		id := fmt.Sprintf("%s@%d", e.Obj.Key, e.Obj.Rev)
		if _, ok := gotBy[id]; ok {
			continue
		}
		before, after := neighbours(evs, e.Obj.Rev)
		where := fmt.Sprintf("between %s and %s", before, after)
		switch {
		case revs[e.Obj.Rev]:
			rp.add(Atomic, "%s: %s %s missing, though other events of revision %d came", what, e.Type, e.Obj, e.Obj.Rev)
		case w.ResumeOf != 0 && (len(evs) == 0 || evs[0].conn == 0 && e.Obj.Rev < lastOfConn(evs, 0)):
			rp.add(Resumable, "%s, resumed from revision %d that watch %d delivered: %s %s missing, %s", what, start, w.ResumeOf, e.Type, e.Obj, where)
		default:
			rp.add(Reliable, "%s: %s %s missing (up to revision %d was delivered), %s", what, e.Type, e.Obj, to, where)
		}
	}
}

// neighbours describes the events delivered just before and after rev.
func neighbours(evs []delivered, rev int64) (string, string) {
	before, after := "the start", "the end"
	for _, d := range evs {
		if d.ev.Obj.Rev < rev {
			before = fmt.Sprintf("%d (conn %d)", d.ev.Obj.Rev, d.conn)
		} else if d.ev.Obj.Rev > rev {
			after = fmt.Sprintf("%d (conn %d)", d.ev.Obj.Rev, d.conn)
			break
		}
	}
	return before, after
}

// lastOfConn is the revision of the last event conn delivered.
func lastOfConn(evs []delivered, conn int) int64 {
	last := int64(0)
	for _, d := range evs {
		if d.conn == conn {
			last = d.ev.Obj.Rev
		}
	}
	return last
}

// checkInitial checks a watch list's initial events, up to the
// k8s.io/initial-events-end bookmark: they must be the state in scope at
// the bookmark's revision, no older than the request asked for. It returns
// that revision and the index of the first event of conn 0 after the
// bookmark; false if there is no such bookmark (the watch is then checked
// no further).
func checkInitial(w *Watch, t *Truth, a *acks, rp *reporter, what string) (int64, int, bool) {
	c0 := &w.Conns[0]
	end := -1
	for i, e := range c0.Events {
		if e.Type == "BOOKMARK" && e.InitialEnd {
			end = i
			break
		}
	}
	if end < 0 {
		if c0.Code == http.StatusGone {
			// No revision of the past was asked for.
			rp.add(Gone, "%s: a watch list answered 410 (%s)", what, c0.Reason)
		}
		for _, e := range c0.Events {
			if e.Type != "ADDED" {
				rp.add(InitialEvents, "%s: a %s event at %d among the initial events", what, e.Type, e.Obj.Rev)
				continue
			}
			checkObj(t, e.Obj, rp, what+": initial event")
		}
		if c0.Code == 0 && c0.Err == "" {
			rp.add(InitialEvents, "%s: the stream ended after %d initial events without the k8s.io/initial-events-end bookmark", what, len(c0.Events))
		}
		return 0, 0, false
	}
	x := c0.Events[end].Obj.Rev
	var init []Obj
	for _, e := range c0.Events[:end] {
		if e.Type != "ADDED" {
			rp.add(InitialEvents, "%s: a %s event at %d among the initial events", what, e.Type, e.Obj.Rev)
			continue
		}
		if e.Obj.Rev > x {
			rp.add(InitialEvents, "%s: initial event %s is newer than the initial-events-end bookmark at %d", what, e.Obj, x)
		}
		init = append(init, e.Obj)
	}
	if x <= t.End {
		if d := diffObjs(t.State(w.Scope, x), init); d != "" {
			rp.add(InitialEvents, "%s: the initial events are not the state at the bookmark's revision %d: %s", what, x, d)
		}
	}
	if w.Consistent {
		if f, ok := a.floor(w.Scope.Resource, c0.Call); ok && x < f {
			rp.add(InitialEvents, "%s: the initial state is at revision %d, older than revision %d a write made before the watch started", what, x, f)
		}
	}
	// resourceVersionMatch=NotOlderThan with a resourceVersion: the
	// initial state must be no older than it.
	if asked, err := strconv.ParseInt(c0.RV, 10, 64); err == nil && x < asked {
		rp.add(InitialEvents, "%s: the initial state is at revision %d, older than resourceVersion %d it asked for", what, x, asked)
	}
	return x, end + 1, true
}
