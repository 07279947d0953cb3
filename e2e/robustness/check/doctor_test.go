package check_test

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"testing"

	"github.com/crdserver/crdserver/e2e/robustness/check"
)

// A doctoring breaks a correct history (or its truth) the way a faulty
// server would; the check must then report its guarantee, and no other
// but those in also.
type doctoring struct {
	name   string
	want   string
	also   []string
	doctor func(t *testing.T, s *sim)
}

var doctorings = []doctoring{
	// Watches.
	{"event dropped", check.Reliable, nil, func(t *testing.T, s *sim) {
		s.remove(s.findEvent(t, func(w *check.Watch, ps []pos, i int) bool {
			return w.ResumeOf == 0 && i > 0 && ps[i-1].c == ps[i].c && s.isEvent(ps[i]) && s.uniqueRev(ps, i) && s.passed(ps, i)
		}))
	}},
	{"event dropped at a reconnect", check.Reliable, nil, func(t *testing.T, s *sim) {
		s.remove(s.findEvent(t, func(w *check.Watch, ps []pos, i int) bool {
			return w.ResumeOf == 0 && ps[i].c > 0 && ps[i].e == 0 && s.isEvent(ps[i]) && s.uniqueRev(ps, i) && s.passed(ps, i)
		}))
	}},
	{"last event before a reconnect dropped", check.Reliable, nil, func(t *testing.T, s *sim) {
		s.remove(s.findEvent(t, func(w *check.Watch, ps []pos, i int) bool {
			return w.ResumeOf == 0 && i+1 < len(ps) && ps[i+1].c > ps[i].c && s.isEvent(ps[i]) && s.uniqueRev(ps, i) && s.passed(ps, i)
		}))
	}},
	{"event doubled", check.Unique, nil, func(t *testing.T, s *sim) {
		p := s.findEvent(t, func(_ *check.Watch, ps []pos, i int) bool { return s.isEvent(ps[i]) })
		s.insert(pos{p.w, p.c, p.e + 1}, *s.ev(p))
	}},
	{"event delivered again after a reconnect", check.Unique, nil, func(t *testing.T, s *sim) {
		p := s.findEvent(t, func(_ *check.Watch, ps []pos, i int) bool {
			return s.isEvent(ps[i]) && i+1 < len(ps) && ps[i+1].c == ps[i].c+1 && ps[i+1].e == 0
		})
		s.insert(pos{p.w, p.c + 1, 0}, *s.ev(p))
	}},
	{"events swapped", check.Ordered, nil, func(t *testing.T, s *sim) {
		p := s.findEvent(t, func(_ *check.Watch, ps []pos, i int) bool {
			return i+1 < len(ps) && ps[i+1].c == ps[i].c && s.isEvent(ps[i]) && s.isEvent(ps[i+1]) && s.ev(ps[i]).Obj.Rev < s.ev(ps[i+1]).Obj.Rev
		})
		c := s.conn(p)
		c.Events[p.e], c.Events[p.e+1] = c.Events[p.e+1], c.Events[p.e]
	}},
	{"DELETED on leaving the selector made MODIFIED", check.Filtered, nil, func(t *testing.T, s *sim) {
		s.ev(s.findEvent(t, func(w *check.Watch, ps []pos, i int) bool {
			e := s.ev(ps[i])
			return w.Scope.Group != "" && e.Type == "DELETED" && !s.deletedAt(e.Obj.Key, e.Obj.Rev)
		})).Type = "MODIFIED"
	}},
	{"event outside the label selector", check.Filtered, nil, func(t *testing.T, s *sim) {
		s.insertOutside(t, func(w *check.Watch) bool { return w.Scope.Group != "" }, func(sc check.Scope, k simKey, before, after string) bool {
			return inResource(sc, k) && before != sc.Group && after != sc.Group
		})
	}},
	{"event outside the name selector", check.Filtered, nil, func(t *testing.T, s *sim) {
		s.insertOutside(t, func(w *check.Watch) bool { return w.Scope.Name != "" }, func(sc check.Scope, k simKey, _, _ string) bool {
			return k.res == sc.Resource && (sc.Namespace == "" || k.ns == sc.Namespace) && k.name != sc.Name
		})
	}},
	{"event from another namespace", check.Filtered, nil, func(t *testing.T, s *sim) {
		s.insertOutside(t, func(w *check.Watch) bool { return w.Scope.Namespace != "" }, func(sc check.Scope, k simKey, _, _ string) bool {
			return k.res == sc.Resource && k.ns != sc.Namespace
		})
	}},
	{"event dropped in a watch resumed from another's revision", check.Resumable, nil, func(t *testing.T, s *sim) {
		s.remove(s.findEvent(t, func(w *check.Watch, ps []pos, i int) bool {
			if w.ResumeOf == 0 || ps[i].c != 0 || !s.isEvent(ps[i]) || !s.uniqueRev(ps, i) {
				return false
			}
			for _, q := range ps[i+1:] {
				if q.c == 0 && s.isEvent(q) && s.ev(q).Obj.Rev > s.ev(ps[i]).Obj.Rev {
					return true
				}
			}
			return false
		}))
	}},
	{"bookmark newer than the next event", check.Bookmarkable, nil, func(t *testing.T, s *sim) {
		p := s.findEvent(t, func(_ *check.Watch, ps []pos, i int) bool {
			return i+1 < len(ps) && ps[i+1].c == ps[i].c && s.isEvent(ps[i]) && s.isEvent(ps[i+1]) && s.ev(ps[i]).Obj.Rev < s.ev(ps[i+1]).Obj.Rev
		})
		next := *s.ev(pos{p.w, p.c, p.e + 1})
		s.insert(pos{p.w, p.c, p.e + 1}, check.WatchEvent{Type: "BOOKMARK", Obj: check.Obj{Rev: next.Obj.Rev}, At: next.At})
	}},
	{"bookmark older than the event before it", check.Bookmarkable, nil, func(t *testing.T, s *sim) {
		p := s.findEvent(t, func(_ *check.Watch, ps []pos, i int) bool { return s.isEvent(ps[i]) })
		e := *s.ev(p)
		s.insert(pos{p.w, p.c, p.e + 1}, check.WatchEvent{Type: "BOOKMARK", Obj: check.Obj{Rev: e.Obj.Rev - 1}, At: e.At})
	}},
	{"event of a revision split from the others", check.Atomic, nil, func(t *testing.T, s *sim) {
		s.remove(s.findEvent(t, func(_ *check.Watch, ps []pos, i int) bool {
			return i > 0 && ps[i-1].c == ps[i].c && s.isEvent(ps[i-1]) && s.isEvent(ps[i]) && s.ev(ps[i-1]).Obj.Rev == s.ev(ps[i]).Obj.Rev
		}))
	}},
	{"watch event with a state etcd never wrote", check.Acknowledged, nil, func(t *testing.T, s *sim) {
		s.ev(s.findEvent(t, func(_ *check.Watch, ps []pos, i int) bool { return s.ev(ps[i]).Type == "MODIFIED" })).Obj.WriteID = "never-written"
	}},

	// Watch lists.
	{"initial event missing", check.InitialEvents, nil, func(t *testing.T, s *sim) {
		w := s.findWatch(t, func(w *check.Watch) bool { return w.Mode == check.WatchList && initialEnd(w) > 1 })
		w.Conns[0].Events = slices.Delete(w.Conns[0].Events, 0, 1)
	}},
	{"initial events not ended by the k8s.io/initial-events-end bookmark", check.InitialEvents, nil, func(t *testing.T, s *sim) {
		w := s.findWatch(t, func(w *check.Watch) bool { return w.Mode == check.WatchList && initialEnd(w) > 0 })
		w.Conns[0].Events[initialEnd(w)-1].InitialEnd = false
	}},
	{"initial-events-end bookmark missing from a stream that ended", check.InitialEvents, nil, func(t *testing.T, s *sim) {
		w := s.findWatch(t, func(w *check.Watch) bool {
			return w.Mode == check.WatchList && initialEnd(w) > 0 && w.Conns[0].Code == 0 && w.Conns[0].Err == ""
		})
		w.Conns[0].Events = slices.Delete(w.Conns[0].Events, initialEnd(w)-1, initialEnd(w))
	}},
	{"watch list older than the resourceVersion it asked for", check.InitialEvents, nil, func(t *testing.T, s *sim) {
		w := s.findWatch(t, func(w *check.Watch) bool {
			_, err := strconv.ParseInt(w.Conns[0].RV, 10, 64)
			return w.Mode == check.WatchList && err == nil && w.Conns[0].RV != "0" && initialEnd(w) > 0
		})
		x := w.Conns[0].Events[initialEnd(w)-1].Obj.Rev
		w.Conns[0].RV = strconv.FormatInt(x+1, 10)
	}},
	{"consistent watch list older than an acknowledged write", check.InitialEvents, []string{check.Reliable}, func(t *testing.T, s *sim) {
		var f int64
		w := s.findWatch(t, func(w *check.Watch) bool {
			f = s.floor(w.Scope.Resource, w.Conns[0].Call)
			return w.Consistent && initialEnd(w) > 0 && f > simStart
		})
		c := &w.Conns[0]
		end := c.Events[initialEnd(w)-1]
		var init []check.WatchEvent
		for _, o := range s.state(w.Scope, f-1) {
			init = append(init, check.WatchEvent{Type: "ADDED", Obj: o, At: end.At})
		}
		end.Obj.Rev = f - 1
		c.Events = append(append(init, end), c.Events[initialEnd(w):]...)
	}},

	// Lists.
	{"list of an older state", check.ListState, nil, func(t *testing.T, s *sim) {
		var older []check.Obj
		l := s.findList(t, func(l *check.List) bool {
			for r := l.Rev - 1; r >= simStart; r-- {
				if older = s.state(l.Scope, r); !slices.Equal(older, l.Items) {
					return true
				}
			}
			return false
		})
		l.Items = older
	}},
	{"consistent list older than an acknowledged write", check.ListState, nil, func(t *testing.T, s *sim) {
		var f int64
		l := s.findList(t, func(l *check.List) bool {
			f = s.floor(l.Scope.Resource, l.Call)
			return l.RV == "" && f > simStart
		})
		s.setListRev(l, f-1)
	}},
	{"Exact list at another revision", check.ListState, nil, func(t *testing.T, s *sim) {
		s.setListRev(s.findList(t, func(l *check.List) bool { return l.Match == "Exact" && l.Rev < s.rev }), 0)
	}},
	{"NotOlderThan list older than asked", check.ListState, nil, func(t *testing.T, s *sim) {
		l := s.findList(t, func(l *check.List) bool {
			asked, _ := strconv.ParseInt(l.RV, 10, 64)
			return l.Match == "NotOlderThan" && asked > simStart
		})
		asked, _ := strconv.ParseInt(l.RV, 10, 64)
		s.setListRev(l, asked-1)
	}},
	{"list at a resourceVersion without match older than asked", check.ListState, nil, func(t *testing.T, s *sim) {
		l := s.findList(t, func(l *check.List) bool {
			asked, err := strconv.ParseInt(l.RV, 10, 64)
			return l.Match == "" && err == nil && asked > simStart
		})
		asked, _ := strconv.ParseInt(l.RV, 10, 64)
		s.setListRev(l, asked-1)
	}},
	{"list pages at two revisions", check.ListState, nil, func(t *testing.T, s *sim) {
		l := s.findList(t, func(l *check.List) bool { return len(l.PageRevs) > 1 })
		l.PageRevs[1]--
	}},
	{"list items out of key order", check.ListState, nil, func(t *testing.T, s *sim) {
		l := s.findList(t, func(l *check.List) bool { return len(l.Items) > 1 })
		l.Items[0], l.Items[1] = l.Items[1], l.Items[0]
	}},
	{"list item etcd never held", check.Acknowledged, []string{check.ListState}, func(t *testing.T, s *sim) {
		s.findList(t, func(l *check.List) bool { return len(l.Items) > 0 }).Items[0].WriteID = "never-written"
	}},

	// Requests on objects.
	{"acknowledged write lost", check.Acknowledged, nil, func(t *testing.T, s *sim) {
		op := s.findOp(t, func(op *check.Op) bool {
			return (op.Kind == check.Create || op.Kind == check.Update) && op.Outcome() == check.OK
		})
		op.WriteID = "lost-" + op.WriteID
		op.Obj.WriteID = op.WriteID
	}},
	{"acknowledged write missing from etcd", check.Acknowledged, []string{check.ListState, check.InitialEvents}, func(t *testing.T, s *sim) {
		// The last change etcd made of an object, written by a create or
		// an update that was acknowledged, is not in etcd.
		for i := len(s.tr.Changes) - 1; i >= 0; i-- {
			c := s.tr.Changes[i]
			if s.madeBy(c.Key, c.Rev, check.Create) || s.madeBy(c.Key, c.Rev, check.Update) {
				if s.lastChange(c.Key) == c.Rev {
					s.tr.Changes = slices.Delete(s.tr.Changes, i, i+1)
					return
				}
			}
		}
		t.Fatal("no change to lose")
	}},
	{"acknowledged delete not in etcd", check.Acknowledged, []string{check.Linearizable}, func(t *testing.T, s *sim) {
		// An update acknowledged as a delete: etcd holds the update.
		op := s.findOp(t, func(op *check.Op) bool { return op.Kind == check.Update && op.Outcome() == check.OK })
		op.Kind, op.WriteID, op.Group, op.Obj = check.Delete, "", "", nil
	}},
	{"read of a state etcd never held", check.Acknowledged, nil, func(t *testing.T, s *sim) {
		s.findOp(t, func(op *check.Op) bool { return op.Kind == check.Get && op.Outcome() == check.OK }).Obj.WriteID = "never-written"
	}},
	{"foreign write in etcd", check.Acknowledged, nil, func(t *testing.T, s *sim) {
		s.tr.End++
		s.tr.Changes = append(s.tr.Changes, check.Change{Key: "widgets/ns-a/intruder", Version: check.Version{Rev: s.tr.End, WriteID: "foreign", Group: "red"}})
	}},
	{"a create applied twice", check.Acknowledged, []string{check.Linearizable}, func(t *testing.T, s *sim) {
		// An object deleted by the end, created again by its first
		// create's lost retry.
		for _, k := range s.keys {
			vs := s.vers[k.key]
			if len(vs) < 2 || !vs[len(vs)-1].deleted || vs[0].deleted || vs[0].writeID == "" {
				continue
			}
			s.tr.End++
			s.tr.Changes = append(s.tr.Changes, check.Change{Key: k.key, Version: check.Version{Rev: s.tr.End, WriteID: vs[0].writeID, Group: vs[0].group}})
			return
		}
		t.Fatal("no object deleted at the end")
	}},
	{"foreign deletion in etcd", check.Acknowledged, nil, func(t *testing.T, s *sim) {
		for _, k := range s.keys {
			if _, ok := s.stateAt(k.key, s.rev); !ok || s.mayHaveDeleted(k.key) != s.deletions(k.key) {
				continue
			}
			s.tr.End++
			s.tr.Changes = append(s.tr.Changes, check.Change{Key: k.key, Version: check.Version{Rev: s.tr.End, Deleted: true}})
			return
		}
		t.Fatal("no object to delete")
	}},
	{"stale quorum read", check.Linearizable, nil, staleRead},
	{"update against a stale precondition", check.Linearizable, nil, func(t *testing.T, s *sim) {
		var prev simVersion
		op := s.findOp(t, func(op *check.Op) bool {
			if op.Kind != check.Update || op.Outcome() != check.OK || op.IfRev <= simStart {
				return false
			}
			// The state it replaced was written by an update or a patch:
			// that one cannot be ordered after this one.
			vs := s.vers[op.Key]
			for i, v := range vs {
				if v.rev == op.IfRev && i > 0 && !vs[i-1].deleted {
					prev = vs[i-1]
					return s.madeBy(op.Key, v.rev, check.Update) || s.madeBy(op.Key, v.rev, check.Patch)
				}
			}
			return false
		})
		op.IfRev = prev.rev
	}},

	// 410 Gone.
	{"list 410 for a revision not compacted", check.Gone, nil, func(t *testing.T, s *sim) {
		l := s.findList(t, func(l *check.List) bool { return l.Match == "Exact" && !s.compacted(l.Rev, l.Return) })
		l.Code, l.Reason, l.FailedRV, l.Pages, l.Items = http.StatusGone, "Expired", l.Rev, 0, nil
	}},
	{"watch 410 for a revision not compacted", check.Gone, nil, func(t *testing.T, s *sim) {
		w := s.findWatch(t, func(w *check.Watch) bool {
			c := &w.Conns[len(w.Conns)-1]
			return c.Code == 0 && !s.compacted(s.covered(w)+1, c.End)
		})
		c := &w.Conns[len(w.Conns)-1]
		c.Code, c.Reason = http.StatusGone, "Expired"
	}},
	{"consistent list 410", check.Gone, nil, func(t *testing.T, s *sim) {
		l := s.findList(t, func(l *check.List) bool { return l.RV == "" })
		l.Code, l.Reason, l.FailedRV, l.Pages, l.Items = http.StatusGone, "Expired", 0, 0, nil
	}},
	{"watch list 410", check.Gone, nil, func(t *testing.T, s *sim) {
		w := s.findWatch(t, func(w *check.Watch) bool { return w.Mode == check.WatchList && len(w.Conns[0].Events) > 0 })
		w.Conns[0].Events, w.Conns[0].Code, w.Conns[0].Reason = nil, http.StatusGone, "Expired"
		w.Conns = w.Conns[:1]
	}},

	// Answers that are not what they say.
	{"a refused write in etcd", check.Acknowledged, []string{check.Linearizable}, func(t *testing.T, s *sim) {
		op := s.findOp(t, func(op *check.Op) bool { return op.Kind == check.Update && op.Outcome() == check.OK })
		op.Code, op.Reason, op.Obj = http.StatusConflict, "Conflict", nil
	}},
	{"a lost write in etcd under another key", check.Acknowledged, []string{check.Linearizable}, func(t *testing.T, s *sim) {
		op := s.findOp(t, func(op *check.Op) bool { return op.Kind == check.Create && op.Outcome() == check.OK })
		op.Code, op.Obj, op.Key = 0, nil, op.Key+"-elsewhere"
	}},
	{"an undecodable answer", check.Acknowledged, nil, func(t *testing.T, s *sim) {
		s.findOp(t, func(op *check.Op) bool { return op.Kind == check.Get && op.Outcome() == check.OK }).Undecodable = true
	}},
}

func TestDoctoredHistoryFails(t *testing.T) {
	for _, d := range doctorings {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			for seed := uint64(1); seed <= 3; seed++ {
				s := simulate(defaultConfig(seed))
				d.doctor(t, s)
				r := s.check(t, check.Options{})
				t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) { assertCaught(t, r, d.want, d.also...) })
			}
		})
	}
}

// assertCaught checks that r reports a violation of want and none but of
// want or also.
func assertCaught(t *testing.T, r check.Report, want string, also ...string) {
	t.Helper()
	caught := false
	for _, v := range r.Violations {
		switch {
		case v.Guarantee == want:
			caught = true
			t.Logf("caught: %s", v)
		case slices.Contains(also, v.Guarantee):
			t.Logf("also: %s", v)
		default:
			t.Errorf("a violation of another guarantee: %s", v)
		}
	}
	if !caught {
		t.Errorf("no violation of %s reported", want)
	}
}

// staleRead makes a quorum read return the state before one whose write
// was acknowledged before the read was sent.
func staleRead(t *testing.T, s *sim) {
	var prev simVersion
	op := s.findOp(t, func(op *check.Op) bool {
		if op.Kind != check.Get || op.Outcome() != check.OK {
			return false
		}
		vs := s.vers[op.Key]
		for i := len(vs) - 1; i > 0; i-- {
			if vs[i].rev > op.Obj.Rev || vs[i-1].deleted {
				continue
			}
			if w := s.writeOf(op.Key, vs[i-1].rev, vs[i].rev); w != nil && w.Return < op.Call {
				prev = vs[i-1]
				return true
			}
		}
		return false
	})
	*op.Obj = objOf(op.Key, prev)
}

// pos is where an event is: watch, conn, index.
type pos struct{ w, c, e int }

func (s *sim) conn(p pos) *check.Conn     { return &s.h.Watches[p.w].Conns[p.c] }
func (s *sim) ev(p pos) *check.WatchEvent { return &s.conn(p).Events[p.e] }
func (s *sim) isEvent(p pos) bool         { return s.ev(p).Type != "BOOKMARK" }
func (s *sim) remove(p pos)               { c := s.conn(p); c.Events = slices.Delete(c.Events, p.e, p.e+1) }
func (s *sim) insert(p pos, e check.WatchEvent) {
	c := s.conn(p)
	c.Events = slices.Insert(c.Events, p.e, e)
}

// delivered is where every event and bookmark watch wi delivered after its
// initial events is, in order.
func (s *sim) delivered(wi int) []pos {
	w := &s.h.Watches[wi]
	var out []pos
	for ci, c := range w.Conns {
		first := 0
		if ci == 0 {
			first = initialEnd(w)
		}
		for ei := first; ei < len(c.Events); ei++ {
			out = append(out, pos{wi, ci, ei})
		}
	}
	return out
}

// findEvent is the first delivered event for which ok holds, given all of
// its watch's.
func (s *sim) findEvent(t *testing.T, ok func(w *check.Watch, ps []pos, i int) bool) pos {
	t.Helper()
	for wi := range s.h.Watches {
		ps := s.delivered(wi)
		for i := range ps {
			if ok(&s.h.Watches[wi], ps, i) {
				return ps[i]
			}
		}
	}
	t.Fatal("no event to doctor")
	return pos{}
}

// uniqueRev: no other event of the watch is of the revision of ps[i].
func (s *sim) uniqueRev(ps []pos, i int) bool {
	for j, q := range ps {
		if j != i && s.isEvent(q) && s.ev(q).Obj.Rev == s.ev(ps[i]).Obj.Rev {
			return false
		}
	}
	return true
}

// passed: the watch delivered a later revision than that of ps[i], so
// it must have delivered ps[i].
func (s *sim) passed(ps []pos, i int) bool {
	for _, q := range ps[i+1:] {
		if s.ev(q).Obj.Rev > s.ev(ps[i]).Obj.Rev {
			return true
		}
	}
	return false
}

// start is the revision a watch started from: the one it was sent with,
// or a watch list's initial-events-end bookmark's.
func (s *sim) start(w *check.Watch) int64 {
	if n := initialEnd(w); n > 0 {
		return w.Conns[0].Events[n-1].Obj.Rev
	}
	rev, _ := strconv.ParseInt(w.Conns[0].RV, 10, 64)
	return rev
}

// covered is the last revision a watch delivered.
func (s *sim) covered(w *check.Watch) int64 {
	rev, _ := strconv.ParseInt(w.Conns[0].RV, 10, 64)
	for _, c := range w.Conns {
		for _, e := range c.Events {
			rev = max(rev, e.Obj.Rev)
		}
	}
	return rev
}

// insertOutside inserts, into a watch for which ok holds, the event of a
// change etcd made of an object the watch does not select, between two
// events whose revisions lie around it.
func (s *sim) insertOutside(t *testing.T, ok func(w *check.Watch) bool, outside func(sc check.Scope, k simKey, before, after string) bool) {
	t.Helper()
	for wi := range s.h.Watches {
		w := &s.h.Watches[wi]
		if !ok(w) {
			continue
		}
		ps := s.delivered(wi)
		for i := -1; i+1 < len(ps); i++ {
			// Between the i-th event and the next; i = -1: between the
			// revision the watch started from and its first event.
			var from int64
			at := pos{wi, 0, initialEnd(w)}
			if i < 0 {
				from = s.start(w)
			} else {
				from, at = s.ev(ps[i]).Obj.Rev, pos{ps[i].w, ps[i].c, ps[i].e + 1}
			}
			to := s.ev(ps[i+1]).Obj.Rev
			for _, c := range s.log {
				if c.rev <= from || c.rev >= to || c.deleted {
					continue
				}
				before, _ := s.stateAt(c.key, c.rev-1)
				if outside(w.Scope, s.key[c.key], before.group, c.group) {
					s.insert(at, check.WatchEvent{Type: "MODIFIED", Obj: objOf(c.key, c.simVersion), At: s.ev(ps[i+1]).At})
					return
				}
			}
		}
	}
	t.Fatal("no watch to doctor")
}

func (s *sim) findWatch(t *testing.T, ok func(w *check.Watch) bool) *check.Watch {
	t.Helper()
	for wi := range s.h.Watches {
		if w := &s.h.Watches[wi]; len(w.Conns) > 0 && ok(w) {
			return w
		}
	}
	t.Fatal("no watch to doctor")
	return nil
}

// findList is the first list that completed for which ok holds.
func (s *sim) findList(t *testing.T, ok func(l *check.List) bool) *check.List {
	t.Helper()
	for i := range s.h.Lists {
		if l := &s.h.Lists[i]; !l.Failed() && ok(l) {
			return l
		}
	}
	t.Fatal("no list to doctor")
	return nil
}

// setListRev makes l a list at revision rev (l.Rev+1 if 0) with the state
// etcd held then.
func (s *sim) setListRev(l *check.List, rev int64) {
	if rev == 0 {
		rev = l.Rev + 1
	}
	l.Rev, l.Items = rev, s.state(l.Scope, rev)
	for i := range l.PageRevs {
		l.PageRevs[i] = rev
	}
}

func (s *sim) findOp(t *testing.T, ok func(op *check.Op) bool) *check.Op {
	t.Helper()
	for i := range s.h.Ops {
		if op := &s.h.Ops[i]; ok(op) {
			return op
		}
	}
	t.Fatal("no request to doctor")
	return nil
}

// writeOf is the request, acknowledged, that changed key from the state
// at revision from to the one at revision to.
func (s *sim) writeOf(key string, from, to int64) *check.Op {
	for i := range s.h.Ops {
		op := &s.h.Ops[i]
		if op.Key != key || !op.Kind.IsWrite() || op.Outcome() != check.OK {
			continue
		}
		if op.Obj != nil && op.Obj.Rev == to || op.Kind == check.Delete && op.IfRev == from && s.deletedAt(key, to) {
			return op
		}
	}
	return nil
}

// madeBy: an acknowledged request of kind wrote key's state at rev.
func (s *sim) madeBy(key string, rev int64, kind check.OpKind) bool {
	for i := range s.h.Ops {
		op := &s.h.Ops[i]
		if op.Key == key && op.Kind == kind && op.Outcome() == check.OK && op.Obj != nil && op.Obj.Rev == rev {
			return true
		}
	}
	return false
}

// floor is the newest revision a write to resource acknowledged before
// time at made.
func (s *sim) floor(resource string, at int64) int64 {
	f := int64(0)
	for i := range s.h.Ops {
		op := &s.h.Ops[i]
		if !op.Kind.IsWrite() || op.Outcome() != check.OK || op.Return >= at || s.key[op.Key].res != resource {
			continue
		}
		if op.Obj != nil {
			f = max(f, op.Obj.Rev)
			continue
		}
		for _, v := range s.vers[op.Key] {
			if v.rev > op.IfRev {
				f = max(f, v.rev)
				break
			}
		}
	}
	return f
}

// mayHaveDeleted counts the deletes of key that took effect or may have.
func (s *sim) mayHaveDeleted(key string) int {
	n := 0
	for i := range s.h.Ops {
		if op := &s.h.Ops[i]; op.Key == key && op.Kind == check.Delete && (op.Outcome() == check.OK || op.Outcome() == check.Unknown) {
			n++
		}
	}
	return n
}

// lastChange is the revision of the last change etcd made of key.
func (s *sim) lastChange(key string) int64 {
	vs := s.vers[key]
	return vs[len(vs)-1].rev
}

// deletions counts etcd's deletions of key.
func (s *sim) deletions(key string) int {
	n := 0
	for _, c := range s.log {
		if c.key == key && c.deleted {
			n++
		}
	}
	return n
}
