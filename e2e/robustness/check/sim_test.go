package check_test

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"sort"
	"strconv"

	"github.com/crdserver/crdserver/e2e/robustness/check"
)

// The simulator: an in-memory perfect server over a few objects with a
// global revision counter, its clients' requests, lists and watches, and
// etcd's history of the objects (the truth). What it records is a correct
// history; the tests doctor it to prove each check can fail.
//
// Its state is its own (sim.vers, sim.log): it does not use Truth to
// answer, so a fault in Truth's queries is not carried into the history.

const (
	us       = int64(1000) // a microsecond, in nanoseconds
	ms       = 1000 * us
	simStart = int64(100) // Truth.Start: the revision the traffic starts at
)

var (
	simResources  = []string{"widgets", "gadgets"}
	simNamespaces = []string{"ns-a", "ns-b"}
	simNames      = []string{"obj-0", "obj-1", "obj-2"}
	simGroups     = []string{"red", "blue"}
)

// simConfig shapes one simulated run.
type simConfig struct {
	Seed    uint64
	Writers int // clients making requests on objects
	Ops     int // requests on objects, over all writers
	Lists   int // random lists, besides those made to meet compactions
	Watches int // random logical watches, besides those made to meet compactions
	// Pairs: now and then two writes to different objects commit at one
	// revision, as one etcd transaction would.
	Pairs bool
}

func defaultConfig(seed uint64) simConfig {
	return simConfig{Seed: seed, Writers: 4, Ops: 320, Lists: 40, Watches: 28, Pairs: true}
}

type simKey struct{ key, res, ns, name string }

// simVersion is one state of an object (or its deletion) in etcd.
type simVersion struct {
	rev     int64
	deleted bool
	writeID string
	group   string
}

type simChange struct {
	key string
	simVersion
	at int64 // when etcd committed it
}

// revMark: the global revision is rev from time at on.
type revMark struct{ at, rev int64 }

type fate int

const (
	fateOK       fate = iota
	fateRefused       // 429, no effect
	fateLostDone      // the answer is lost; it took effect
	fateLostNot       // the answer is lost; it did not take effect
)

type taskKind int

const (
	taskCall taskKind = iota
	taskEffect
	taskReturn
)

type simTask struct {
	at     int64
	seq    int
	kind   taskKind
	client int
	op     int // index in h.Ops
}

type simClient struct {
	known map[string]int64 // the revision last seen of each object (absent: none or unknown)
	left  int
}

type sim struct {
	cfg  simConfig
	rng  *rand.Rand
	keys []simKey // in key order
	key  map[string]simKey

	rev         int64 // etcd's revision
	marks       []revMark
	vers        map[string][]simVersion // every version of each object, oldest first
	initial     []check.Change
	log         []simChange // the changes after simStart, in revision order
	compactions []check.Compaction

	clients []simClient
	tasks   []simTask
	seq     int
	fates   []fate
	writes  int
	end     int64 // when the last request on an object returned

	h  *check.History
	tr *check.Truth
}

// simulate runs the traffic of cfg against a perfect server: a correct
// history and its truth (not yet indexed).
func simulate(cfg simConfig) *sim {
	s := &sim{
		cfg:  cfg,
		rng:  rand.New(rand.NewPCG(cfg.Seed, cfg.Seed*0x9e3779b97f4a7c15+1)),
		key:  map[string]simKey{},
		rev:  simStart,
		vers: map[string][]simVersion{},
		h:    &check.History{},
	}
	for _, res := range simResources {
		for _, ns := range simNamespaces {
			for _, name := range simNames {
				k := simKey{key: res + "/" + ns + "/" + name, res: res, ns: ns, name: name}
				s.keys = append(s.keys, k)
				s.key[k.key] = k
			}
		}
	}
	sort.Slice(s.keys, func(i, j int) bool { return s.keys[i].key < s.keys[j].key })
	s.marks = []revMark{{at: 0, rev: simStart}}

	// Some objects exist when the traffic starts.
	rev := int64(40)
	for i, k := range s.keys {
		if s.rng.IntN(2) == 0 {
			continue
		}
		rev += 1 + s.rng.Int64N(4)
		v := simVersion{rev: rev, writeID: fmt.Sprintf("init-%d", i), group: s.group()}
		s.vers[k.key] = append(s.vers[k.key], v)
		s.initial = append(s.initial, check.Change{Key: k.key, Version: check.Version{Rev: v.rev, WriteID: v.writeID, Group: v.group}})
	}

	s.runRequests()
	s.compact()
	s.runReads()

	s.tr = &check.Truth{Start: simStart, End: s.rev, Initial: s.initial, Compactions: s.compactions}
	for _, c := range s.log {
		s.tr.Changes = append(s.tr.Changes, check.Change{Key: c.key, Version: check.Version{Rev: c.rev, Deleted: c.deleted, WriteID: c.writeID, Group: c.group}})
	}
	return s
}

func (s *sim) group() string { return simGroups[s.rng.IntN(len(simGroups))] }

// latency is how long a hop between a client and the server takes.
func (s *sim) latency() int64 { return 100*us + s.rng.Int64N(2*ms) }

func (s *sim) schedule(t simTask) {
	s.seq++
	t.seq = s.seq
	s.tasks = append(s.tasks, t)
}

func (s *sim) pop() simTask {
	best := 0
	for i, t := range s.tasks {
		if t.at < s.tasks[best].at || t.at == s.tasks[best].at && t.seq < s.tasks[best].seq {
			best = i
		}
	}
	t := s.tasks[best]
	s.tasks = append(s.tasks[:best], s.tasks[best+1:]...)
	return t
}

// runRequests runs the writers' requests on objects, each taking effect
// at one moment between its call and its return.
func (s *sim) runRequests() {
	s.clients = make([]simClient, s.cfg.Writers)
	for c := range s.clients {
		s.clients[c] = simClient{known: map[string]int64{}, left: s.cfg.Ops / s.cfg.Writers}
		s.schedule(simTask{at: s.rng.Int64N(ms), kind: taskCall, client: c})
	}
	for len(s.tasks) > 0 {
		t := s.pop()
		switch t.kind {
		case taskCall:
			s.call(t)
		case taskEffect:
			s.effect(t)
		case taskReturn:
			s.answer(t)
		}
	}
}

var simKinds = []struct {
	kind   check.OpKind
	weight int
}{
	{check.Create, 14}, {check.Update, 22}, {check.Apply, 10}, {check.Patch, 10},
	{check.Delete, 12}, {check.Get, 20}, {check.GetStale, 12},
}

func (s *sim) call(t simTask) {
	c := &s.clients[t.client]
	k := s.keys[s.rng.IntN(len(s.keys))]
	total := 0
	for _, x := range simKinds {
		total += x.weight
	}
	kind, r := check.Create, s.rng.IntN(total)
	for _, x := range simKinds {
		if r < x.weight {
			kind = x.kind
			break
		}
		r -= x.weight
	}
	known := c.known[k.key]
	if (kind == check.Update || kind == check.Delete) && known == 0 {
		kind = check.Get // learn its resourceVersion first
	}
	op := check.Op{ID: len(s.h.Ops) + 1, Client: t.client, Kind: kind, Key: k.key, Call: t.at}
	if kind == check.Update || kind == check.Delete {
		op.IfRev = known
	}
	if kind.IsWrite() && kind != check.Delete {
		s.writes++
		op.WriteID = fmt.Sprintf("w%d-c%d", s.writes, t.client)
		op.Group = s.group()
	}
	f := fateOK
	switch r := s.rng.IntN(100); {
	case r < 3:
		f = fateRefused
	case kind == check.GetStale:
	case r < 8:
		f = fateLostDone
	case r < 13:
		f = fateLostNot
	}
	s.h.Ops = append(s.h.Ops, op)
	s.fates = append(s.fates, f)
	s.schedule(simTask{at: t.at + s.latency(), kind: taskEffect, client: t.client, op: len(s.h.Ops) - 1})
}

func (s *sim) effect(t simTask) {
	op := &s.h.Ops[t.op]
	wrote := false
	if f := s.fates[t.op]; f == fateOK || f == fateLostDone {
		wrote = s.apply(op, t.at, false)
	}
	s.returnLater(t)
	if !wrote || !s.cfg.Pairs || s.rng.IntN(2) != 0 {
		return
	}
	// A write to another object of the resource waiting to take effect
	// commits at the same revision: one of the same namespace if there is
	// one, so that more watches see both.
	pair := -1
	for i, p := range s.tasks {
		q := &s.h.Ops[p.op]
		if p.kind != taskEffect || !q.Kind.IsWrite() || q.Key == op.Key || s.fates[p.op] == fateRefused || s.fates[p.op] == fateLostNot {
			continue
		}
		if a, b := s.key[q.Key], s.key[op.Key]; a.res == b.res && (pair < 0 || a.ns == b.ns) {
			pair = i
		}
	}
	if pair < 0 {
		return
	}
	p := s.tasks[pair]
	s.tasks = append(s.tasks[:pair], s.tasks[pair+1:]...)
	s.apply(&s.h.Ops[p.op], t.at, true)
	p.at = t.at
	s.returnLater(p)
}

func (s *sim) returnLater(t simTask) {
	at := t.at + s.latency()
	if f := s.fates[t.op]; f == fateLostDone || f == fateLostNot {
		at += 5 * ms // the client's timeout
	}
	s.schedule(simTask{at: at, kind: taskReturn, client: t.client, op: t.op})
}

// apply takes op into effect at time at and sets its answer; it reports
// whether op wrote. With sameRev the write commits at the revision of the
// write just made.
func (s *sim) apply(op *check.Op, at int64, sameRev bool) bool {
	cur, exists := s.stateAt(op.Key, s.rev)
	write := func(v simVersion, code int) {
		if !sameRev {
			if s.rng.IntN(8) == 0 {
				s.rev += 1 + s.rng.Int64N(3) // other keys of etcd changed
			}
			s.rev++
		}
		v.rev = s.rev
		s.vers[op.Key] = append(s.vers[op.Key], v)
		s.log = append(s.log, simChange{key: op.Key, simVersion: v, at: at})
		s.marks = append(s.marks, revMark{at: at, rev: s.rev})
		op.Code = code
		if !v.deleted {
			op.Obj = &check.Obj{Key: op.Key, Rev: v.rev, WriteID: v.writeID, Group: v.group}
		}
	}
	fail := func(code int, reason string) bool {
		op.Code, op.Reason = code, reason
		if code == http.StatusNotFound {
			_, _, op.Named = check.SplitKey(op.Key)
		}
		return false
	}
	written := simVersion{writeID: op.WriteID, group: op.Group}
	switch op.Kind {
	case check.Create:
		if exists {
			return fail(http.StatusConflict, "AlreadyExists")
		}
		write(written, http.StatusCreated)
	case check.Update, check.Delete:
		switch {
		case !exists:
			return fail(http.StatusNotFound, "NotFound")
		case cur.rev != op.IfRev:
			return fail(http.StatusConflict, "Conflict")
		case op.Kind == check.Delete:
			write(simVersion{deleted: true}, http.StatusOK)
		default:
			write(written, http.StatusOK)
		}
	case check.Apply:
		code := http.StatusOK
		if !exists {
			code = http.StatusCreated
		}
		write(written, code)
	case check.Patch:
		if !exists {
			return fail(http.StatusNotFound, "NotFound")
		}
		write(written, http.StatusOK)
	case check.Get:
		s.read(op, cur, exists)
		return false
	case check.GetStale:
		v, ok := s.stateAt(op.Key, max(simStart, s.revAt(at-s.rng.Int64N(10*ms))))
		s.read(op, v, ok)
		return false
	}
	return true
}

func (s *sim) read(op *check.Op, v simVersion, ok bool) {
	if !ok {
		op.Code, op.Reason = http.StatusNotFound, "NotFound"
		_, _, op.Named = check.SplitKey(op.Key)
		return
	}
	op.Code, op.Obj = http.StatusOK, &check.Obj{Key: op.Key, Rev: v.rev, WriteID: v.writeID, Group: v.group}
}

func (s *sim) answer(t simTask) {
	op := &s.h.Ops[t.op]
	op.Return = t.at
	s.end = max(s.end, t.at)
	switch s.fates[t.op] {
	case fateRefused:
		op.Code, op.Reason, op.Obj = http.StatusTooManyRequests, "TooManyRequests", nil
	case fateLostDone, fateLostNot:
		op.Obj, op.Reason = nil, ""
		if s.rng.IntN(2) == 0 {
			op.Code, op.Err = 0, "context deadline exceeded"
		} else {
			op.Code, op.Reason = http.StatusGatewayTimeout, "Timeout"
		}
	}
	c := &s.clients[t.client]
	switch op.Outcome() {
	case check.OK:
		if op.Obj != nil {
			c.known[op.Key] = op.Obj.Rev
		} else {
			delete(c.known, op.Key)
		}
	case check.NotFound:
		delete(c.known, op.Key)
	}
	if c.left--; c.left > 0 {
		s.schedule(simTask{at: t.at + s.rng.Int64N(500*us), kind: taskCall, client: t.client})
	}
}

// compact asks etcd for two compactions during the run, each to a
// revision some milliseconds old.
func (s *sim) compact() {
	prev := int64(0)
	for i := int64(1); i <= 2; i++ {
		at := s.end*i/3 + s.rng.Int64N(ms)
		rev := s.revAt(at - 10*ms)
		if rev <= prev || rev < simStart+2 {
			continue
		}
		s.compactions = append(s.compactions, check.Compaction{Rev: rev, At: at})
		prev = rev
	}
}

// revAt is etcd's revision at time at.
func (s *sim) revAt(at int64) int64 {
	i := sort.Search(len(s.marks), func(i int) bool { return s.marks[i].at > at })
	if i == 0 {
		return simStart
	}
	return s.marks[i-1].rev
}

// stateAt is the state of key at revision rev; false if it is absent.
func (s *sim) stateAt(key string, rev int64) (simVersion, bool) {
	var cur simVersion
	found := false
	for _, v := range s.vers[key] {
		if v.rev > rev {
			break
		}
		cur, found = v, true
	}
	if !found || cur.deleted {
		return simVersion{}, false
	}
	return cur, true
}

// compacted: a compaction asked for by time at removed revision rev.
func (s *sim) compacted(rev, at int64) bool {
	for _, c := range s.compactions {
		if c.At <= at && rev < c.Rev {
			return true
		}
	}
	return false
}

func inResource(sc check.Scope, k simKey) bool {
	return k.res == sc.Resource && (sc.Namespace == "" || sc.Namespace == k.ns) && (sc.Name == "" || sc.Name == k.name)
}

func selects(sc check.Scope, k simKey, group string) bool {
	return inResource(sc, k) && (sc.Group == "" || sc.Group == group)
}

func objOf(key string, v simVersion) check.Obj {
	return check.Obj{Key: key, Rev: v.rev, WriteID: v.writeID, Group: v.group}
}

// state is what a list of sc at revision rev holds, in key order.
func (s *sim) state(sc check.Scope, rev int64) []check.Obj {
	var out []check.Obj
	for _, k := range s.keys {
		if v, ok := s.stateAt(k.key, rev); ok && selects(sc, k, v.group) {
			out = append(out, objOf(k.key, v))
		}
	}
	return out
}

type simWatchEvent struct {
	ev     check.WatchEvent
	commit int64
}

// events are the events a watch of sc from revision from gets, in order,
// with when etcd committed each.
func (s *sim) events(sc check.Scope, from int64) []simWatchEvent {
	var out []simWatchEvent
	for _, c := range s.log {
		k := s.key[c.key]
		if c.rev <= from || !inResource(sc, k) {
			continue
		}
		prev, had := s.stateAt(c.key, c.rev-1)
		was := had && selects(sc, k, prev.group)
		is := !c.deleted && selects(sc, k, c.group)
		var e check.WatchEvent
		switch {
		case is && !was:
			e = check.WatchEvent{Type: "ADDED", Obj: objOf(c.key, c.simVersion)}
		case is:
			e = check.WatchEvent{Type: "MODIFIED", Obj: objOf(c.key, c.simVersion)}
		case was:
			// The last state it had in scope, at the revision it left.
			e = check.WatchEvent{Type: "DELETED", Obj: check.Obj{Key: c.key, Rev: c.rev, WriteID: prev.writeID, Group: prev.group}}
		default:
			continue
		}
		out = append(out, simWatchEvent{ev: e, commit: c.at})
	}
	return out
}

func (s *sim) scope() check.Scope {
	sc := check.Scope{Resource: simResources[s.rng.IntN(len(simResources))]}
	if s.rng.IntN(2) == 0 {
		sc.Namespace = simNamespaces[s.rng.IntN(len(simNamespaces))]
	}
	if s.rng.IntN(2) == 0 {
		sc.Group = s.group()
	}
	if s.rng.IntN(4) == 0 {
		sc.Name = simNames[s.rng.IntN(len(simNames))]
	}
	return sc
}

// runReads makes the lists and watches of the reading clients. They
// change nothing, so they are made after the requests, from etcd's
// history.
func (s *sim) runReads() {
	reader := func() int { return s.cfg.Writers + s.rng.IntN(3) }
	for range s.cfg.Lists {
		s.randomList(reader(), s.scope(), s.rng.Int64N(s.end))
	}
	for i := range s.cfg.Watches {
		t0 := s.rng.Int64N(s.end)
		sc := s.scope()
		if i%4 == 3 {
			sc.Name = simNames[s.rng.IntN(len(simNames))]
		}
		if i%2 == 0 {
			sc.Group = s.group()
		}
		switch i % 6 {
		case 0, 1:
			s.watch(watchReq{client: reader(), scope: sc, mode: check.FromRV, from: max(simStart, s.revAt(t0-s.rng.Int64N(10*ms))), at: t0})
		case 2:
			s.watch(watchReq{client: reader(), scope: sc, mode: check.WatchList, at: t0})
		case 3:
			rv := "0"
			if i%12 == 3 {
				rv = strconv.FormatInt(max(simStart, s.revAt(t0-s.rng.Int64N(10*ms))), 10)
			}
			s.watch(watchReq{client: reader(), scope: sc, mode: check.WatchList, rv: rv, at: t0})
		default:
			if !s.resume(reader()) {
				s.watch(watchReq{client: reader(), scope: sc, mode: check.FromRV, from: max(simStart, s.revAt(t0-s.rng.Int64N(10*ms))), at: t0})
			}
		}
	}
	// Watches from just before the first revisions that changed two
	// objects.
	pairs := 0
	for i := 1; i < len(s.log) && pairs < 3; i++ {
		if c := s.log[i]; c.rev == s.log[i-1].rev {
			s.watch(watchReq{client: reader(), scope: check.Scope{Resource: s.key[c.key].res}, mode: check.FromRV, from: c.rev - 1, at: c.at + s.latency()})
			pairs++
		}
	}
	// After each compaction: lists and a watch from a compacted revision,
	// and a paged list whose next page comes after it.
	for _, c := range s.compactions {
		l := check.List{ID: len(s.h.Lists) + 1, Client: reader(), Scope: check.Scope{Resource: "widgets"},
			RV: strconv.FormatInt(c.Rev-1, 10), Match: "Exact", Call: c.At + s.latency()}
		s.serveList(&l, c.Rev-1, l.Call+s.latency(), 0)
		l = check.List{ID: len(s.h.Lists) + 1, Client: reader(), Scope: check.Scope{Resource: "widgets"},
			RV: strconv.FormatInt(c.Rev-1, 10), Match: "Exact", Limit: 1, Call: c.At - ms}
		s.serveList(&l, c.Rev-1, c.At-ms/2, ms)
		s.watch(watchReq{client: reader(), scope: s.scope(), mode: check.FromRV, from: c.Rev - 2, at: c.At + s.latency()})
		// A watch cut off, before etcd reached revision c.Rev-1, until
		// after the compaction.
		cut := s.marks[sort.Search(len(s.marks), func(i int) bool { return s.marks[i].rev >= c.Rev-1 })].at - 1
		if t0 := max(0, cut-5*ms); t0 < cut {
			s.watch(watchReq{client: reader(), scope: check.Scope{Resource: "widgets"}, mode: check.FromRV,
				from: s.revAt(t0), at: t0, firstEnd: cut, resumeAfter: c.At + ms})
		}
	}
}

func (s *sim) randomList(client int, sc check.Scope, t0 int64) {
	l := check.List{ID: len(s.h.Lists) + 1, Client: client, Scope: sc, Call: t0}
	eff := t0 + s.latency()
	asked := max(simStart, s.revAt(t0-s.rng.Int64N(30*ms)))
	var rev int64
	switch s.rng.IntN(7) {
	case 0, 1: // consistent
		rev = s.revAt(eff)
		if s.rng.IntN(2) == 0 {
			l.Limit = 2
		}
	case 2: // any: from the cache
		l.RV, rev = "0", max(simStart, s.revAt(eff-s.rng.Int64N(5*ms)))
	case 3, 4:
		l.RV, l.Match, rev = strconv.FormatInt(asked, 10), "Exact", asked
		if s.rng.IntN(2) == 0 {
			l.Limit = 2
		}
	case 5:
		l.RV, l.Match = strconv.FormatInt(asked, 10), "NotOlderThan"
		rev = max(asked, s.revAt(eff-s.rng.Int64N(5*ms)))
	default: // a resourceVersion without a match: not older than it
		l.RV = strconv.FormatInt(asked, 10)
		rev = max(asked, s.revAt(eff-s.rng.Int64N(5*ms)))
	}
	s.serveList(&l, rev, eff, 0)
}

// serveList answers l at revision rev, its first page at time at and each
// next one gap later (a random latency if 0), failing with 410 if a page
// must be read from etcd at a compacted revision.
func (s *sim) serveList(l *check.List, rev, at, gap int64) {
	l.Rev = rev
	fail := func(pages int, at int64) {
		l.Code, l.Reason, l.FailedRV, l.Pages, l.Return = http.StatusGone, "Expired", rev, pages, at+s.latency()
		s.h.Lists = append(s.h.Lists, *l)
	}
	if l.Match == "Exact" && s.compacted(rev, at) {
		fail(0, at)
		return
	}
	items := s.state(l.Scope, rev)
	pages := 1
	if l.Limit > 0 && len(items) > l.Limit {
		pages = (len(items) + l.Limit - 1) / l.Limit
	}
	for p := 1; p < pages; p++ {
		if gap > 0 {
			at += gap
		} else {
			at += s.latency()
		}
		if s.compacted(rev, at) {
			l.Items = items[:p*l.Limit]
			fail(p, at)
			return
		}
	}
	l.Code, l.Items, l.Pages, l.Return = http.StatusOK, items, pages, at+s.latency()
	if pages > 1 {
		for range pages {
			l.PageRevs = append(l.PageRevs, rev)
		}
	}
	s.h.Lists = append(s.h.Lists, *l)
}

// resume starts a watch from a resourceVersion another watch delivered,
// of the same scope; false if no watch delivered any yet.
func (s *sim) resume(client int) bool {
	type from struct {
		w  int
		ev check.WatchEvent
	}
	var cands []from
	for wi, w := range s.h.Watches {
		for ci, c := range w.Conns {
			for ei, e := range c.Events {
				if ci == 0 && ei < initialEnd(&w) {
					continue
				}
				cands = append(cands, from{w: wi, ev: e})
			}
		}
	}
	if len(cands) == 0 {
		return false
	}
	f := cands[s.rng.IntN(len(cands))]
	w := &s.h.Watches[f.w]
	s.watch(watchReq{client: client, scope: w.Scope, mode: check.FromRV, from: f.ev.Obj.Rev, at: f.ev.At + 100*us + s.rng.Int64N(5*ms), resumeOf: w.ID})
	return true
}

// initialEnd is the index in a watch list's first conn of the first event
// after the initial-events-end bookmark (0 for a watch from a revision).
func initialEnd(w *check.Watch) int {
	if w.Mode != check.WatchList || len(w.Conns) == 0 {
		return 0
	}
	for i, e := range w.Conns[0].Events {
		if e.InitialEnd {
			return i + 1
		}
	}
	return len(w.Conns[0].Events)
}

// watchReq is a logical watch to make.
type watchReq struct {
	client int
	scope  check.Scope
	mode   check.WatchMode
	rv     string // a watch list's resourceVersion
	from   int64  // the revision a watch from a revision starts from
	at     int64  // when it starts
	// resumeOf: the watch that delivered from.
	resumeOf int
	// firstEnd and resumeAfter, if set: the first conn ends at firstEnd,
	// and the next is sent no earlier than resumeAfter.
	firstEnd, resumeAfter int64
}

// watch makes one logical watch: up to four watch requests, each resuming
// from the last revision the one before delivered, until the client stops
// or a resumption is refused with 410.
func (s *sim) watch(req watchReq) {
	sc, mode, rv := req.scope, req.mode, req.rv
	w := check.Watch{ID: len(s.h.Watches) + 1, Client: req.client, Scope: sc, Mode: mode, ResumeOf: req.resumeOf,
		Consistent: mode == check.WatchList && rv == ""}
	conns := 1 + s.rng.IntN(4)
	if req.resumeAfter != 0 {
		conns = 2
	}
	at, covered := req.at, req.from
	for ci := range conns {
		c := check.Conn{RV: strconv.FormatInt(covered, 10), Replica: s.rng.IntN(3), Call: at}
		if ci == 0 && mode == check.WatchList {
			c.RV, c.SendInitial = rv, true
			covered = s.initialEvents(&c, sc, rv)
		} else if s.compacted(covered+1, at) {
			c.Code, c.Reason, c.End = http.StatusGone, "Expired", at+200*us
			w.Conns = append(w.Conns, c)
			break
		}
		c.End = at + 2*ms + s.rng.Int64N(30*ms)
		if n := len(c.Events); n > 0 {
			c.End = c.Events[n-1].At + 2*ms + s.rng.Int64N(30*ms)
		}
		if req.firstEnd != 0 && ci == 0 {
			c.End = req.firstEnd
		}
		covered = s.stream(&c, sc, covered)
		if ci < conns-1 && s.rng.IntN(2) == 0 {
			c.Err = "unexpected EOF"
		}
		w.Conns = append(w.Conns, c)
		at = c.End + 100*us + s.rng.Int64N(3*ms)
		if s.rng.IntN(4) == 0 {
			at += 15*ms + s.rng.Int64N(30*ms) // a long outage
		}
		if req.resumeAfter != 0 {
			at = max(at, req.resumeAfter)
		}
	}
	s.h.Watches = append(s.h.Watches, w)
}

// initialEvents fills a watch list's first conn with its initial events
// and the bookmark that ends them; it returns the bookmark's revision.
func (s *sim) initialEvents(c *check.Conn, sc check.Scope, rv string) int64 {
	at := c.Call + s.latency()
	var x int64
	switch rv {
	case "":
		x = s.revAt(at)
	case "0":
		x = max(simStart, s.revAt(at-s.rng.Int64N(5*ms)))
	default:
		asked, _ := strconv.ParseInt(rv, 10, 64)
		x = max(asked, s.revAt(at-s.rng.Int64N(5*ms)))
	}
	for _, o := range s.state(sc, x) {
		c.Events = append(c.Events, check.WatchEvent{Type: "ADDED", Obj: o, At: at})
		at += 20 * us
	}
	c.Events = append(c.Events, check.WatchEvent{Type: "BOOKMARK", Obj: check.Obj{Rev: x}, InitialEnd: true, At: at})
	return x
}

// stream delivers to c, until c.End, the events after revision from, each
// some time after etcd committed it, those of one revision together, and
// now and then a bookmark of a revision whose events all came. It returns
// the last revision delivered.
func (s *sim) stream(c *check.Conn, sc check.Scope, from int64) int64 {
	at := c.Call
	if n := len(c.Events); n > 0 {
		at = c.Events[n-1].At
	}
	covered := from
	evs := s.events(sc, from)
	bookmark := func(rev, at int64) {
		c.Events = append(c.Events, check.WatchEvent{Type: "BOOKMARK", Obj: check.Obj{Rev: rev}, At: at})
		covered = rev
	}
	i := 0
	for i < len(evs) {
		rev := evs[i].ev.Obj.Rev
		t := max(at, evs[i].commit) + 50*us + s.rng.Int64N(400*us)
		if t > c.End {
			break
		}
		if s.rng.IntN(4) == 0 && t-at > 2 {
			tb := at + 1 + s.rng.Int64N(t-at-1)
			if b := min(s.revAt(tb), rev-1); b >= covered {
				bookmark(b, tb)
			}
		}
		for ; i < len(evs) && evs[i].ev.Obj.Rev == rev; i++ {
			e := evs[i].ev
			e.At = t
			c.Events = append(c.Events, e)
		}
		covered, at = rev, t
	}
	if s.rng.IntN(2) == 0 && at < c.End {
		tb := at + 1 + s.rng.Int64N(c.End-at)
		b := s.revAt(tb)
		if i < len(evs) {
			b = min(b, evs[i].ev.Obj.Rev-1)
		}
		if b >= covered {
			bookmark(b, tb)
		}
	}
	return covered
}
