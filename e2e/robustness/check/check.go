package check

import (
	"fmt"
	"net/http"
	"sort"
	"time"
)

// The guarantees a violation is of, as README and DESIGN name them.
const (
	Acknowledged  = "acknowledged"   // answers name states etcd holds; etcd holds only what was written
	Linearizable  = "linearizable"   // each object's writes and quorum reads
	ListState     = "list"           // a list equals the state at its resourceVersion
	Ordered       = "ordered"        // a watch's resourceVersions increase
	Unique        = "unique"         // no event twice
	Atomic        = "atomic"         // nothing of a revision split
	Reliable      = "reliable"       // no gap, across reconnects
	Resumable     = "resumable"      // a watch from a delivered resourceVersion continues alike
	Bookmarkable  = "bookmarkable"   // a bookmark lies between the events around it
	Filtered      = "filtered"       // selectors hold; leaving them is a DELETED
	InitialEvents = "initial-events" // a watch list's initial state, ended by its bookmark
	Gone          = "gone"           // 410 only for a compacted resourceVersion
)

// Guarantees lists every guarantee, in the order reports give them.
var Guarantees = []string{Acknowledged, Linearizable, ListState, Ordered, Unique, Atomic, Reliable, Resumable, Bookmarkable, Filtered, InitialEvents, Gone}

// Violation is one broken guarantee.
type Violation struct {
	Guarantee string `json:"guarantee"`
	What      string `json:"what"`
}

func (v Violation) String() string { return v.Guarantee + ": " + v.What }

// Options tune Check.
type Options struct {
	// VisualizeDir, when set, receives a porcupine visualization (HTML)
	// of each object whose history is not linearizable.
	VisualizeDir string
	// Timeout bounds the linearizability check of each object (default
	// one minute); a check that times out is a violation.
	Timeout time.Duration
	// MaxPerGuarantee bounds the violations reported of each guarantee
	// (default 20); the rest are counted.
	MaxPerGuarantee int
}

// Report is what Check found.
type Report struct {
	Violations []Violation `json:"violations"`
	// Dropped counts violations left out of Violations, by guarantee.
	Dropped map[string]int `json:"dropped,omitempty"`
	// Visualizations are the files written, by key.
	Visualizations map[string]string `json:"visualizations,omitempty"`
	Stats          Stats             `json:"stats"`
}

// Stats count what the history holds.
type Stats struct {
	Ops         map[string]int `json:"ops"`   // kind/outcome → count
	Lists       int            `json:"lists"` // completed lists
	ListsFailed int            `json:"listsFailed"`
	Watches     int            `json:"watches"` // logical watches
	Conns       int            `json:"conns"`   // watch requests
	Events      int            `json:"events"`  // events delivered (not bookmarks)
	Bookmarks   int            `json:"bookmarks"`
	Gone        int            `json:"gone"`     // lists and watch requests answered 410
	Changes     int            `json:"changes"`  // etcd revisions of the traffic's keys
	Resolved    int            `json:"resolved"` // writes with a lost answer found in etcd
}

type reporter struct {
	r   *Report
	max int
	per map[string]int
}

func (rp *reporter) add(guarantee, format string, args ...any) {
	rp.per[guarantee]++
	if rp.per[guarantee] > rp.max {
		if rp.r.Dropped == nil {
			rp.r.Dropped = map[string]int{}
		}
		rp.r.Dropped[guarantee]++
		return
	}
	rp.r.Violations = append(rp.r.Violations, Violation{Guarantee: guarantee, What: fmt.Sprintf(format, args...)})
}

// Check checks a run's history against etcd's truth.
func Check(h *History, t *Truth, o Options) Report {
	if o.Timeout <= 0 {
		o.Timeout = time.Minute
	}
	if o.MaxPerGuarantee <= 0 {
		o.MaxPerGuarantee = 20
	}
	r := Report{Stats: Stats{Ops: map[string]int{}, Changes: len(t.Changes)}}
	rp := &reporter{r: &r, max: o.MaxPerGuarantee, per: map[string]int{}}
	for i := range h.Ops {
		op := &h.Ops[i]
		r.Stats.Ops[string(op.Kind)+"/"+string(op.Outcome())]++
	}
	for i := range h.Lists {
		if h.Lists[i].Code == http.StatusGone {
			r.Stats.Gone++
		}
		if h.Lists[i].Failed() {
			r.Stats.ListsFailed++
		} else {
			r.Stats.Lists++
		}
	}
	for _, w := range h.Watches {
		r.Stats.Watches++
		r.Stats.Conns += len(w.Conns)
		for _, c := range w.Conns {
			if c.Code == http.StatusGone {
				r.Stats.Gone++
			}
			for _, e := range c.Events {
				if e.Type == "BOOKMARK" {
					r.Stats.Bookmarks++
				} else {
					r.Stats.Events++
				}
			}
		}
	}
	a := newAcks(h, t)
	checkAcknowledged(h, t, a, rp)
	r.Stats.Resolved = checkLinearizable(h, t, o, rp)
	checkLists(h, t, a, rp)
	checkWatches(h, t, a, rp)
	sort.SliceStable(r.Violations, func(i, j int) bool {
		return guaranteeIndex(r.Violations[i].Guarantee) < guaranteeIndex(r.Violations[j].Guarantee)
	})
	return r
}

func guaranteeIndex(g string) int {
	for i, x := range Guarantees {
		if x == g {
			return i
		}
	}
	return len(Guarantees)
}

// acks knows when each write was acknowledged and at which revision, for
// the freshness of consistent reads.
type acks struct {
	// byResource holds, per resource, the acknowledged writes by their
	// return time.
	byResource map[string][]ack
}

type ack struct {
	at  int64 // when the answer came
	rev int64 // the revision the write made
}

func newAcks(h *History, t *Truth) *acks {
	a := &acks{byResource: map[string][]ack{}}
	for i := range h.Ops {
		op := &h.Ops[i]
		if !op.Kind.IsWrite() || op.Outcome() != OK {
			continue
		}
		rev := int64(0)
		switch {
		case op.Kind == Delete:
			if v, ok := t.After(op.Key, op.IfRev); ok && v.Deleted {
				rev = v.Rev
			}
		case op.Obj != nil:
			rev = op.Obj.Rev
		}
		if rev == 0 {
			continue
		}
		res, _, _ := SplitKey(op.Key)
		a.byResource[res] = append(a.byResource[res], ack{at: op.Return, rev: rev})
	}
	for _, l := range a.byResource {
		sort.Slice(l, func(i, j int) bool { return l[i].at < l[j].at })
	}
	return a
}

// floor is the newest revision a write to resource had made by the time
// it was acknowledged before at: a consistent read started at at must be
// no older.
func (a *acks) floor(resource string, at int64) (int64, bool) {
	l := a.byResource[resource]
	i := sort.Search(len(l), func(i int) bool { return l[i].at >= at })
	best := int64(0)
	for _, x := range l[:i] {
		best = max(best, x.rev)
	}
	return best, best > 0
}

// checkAcknowledged checks that every object an answer carried is a state
// etcd holds at that revision, that every acknowledged write is in etcd,
// and that etcd holds nothing the traffic did not write.
func checkAcknowledged(h *History, t *Truth, _ *acks, rp *reporter) {
	written := map[string]bool{}
	deletes := map[string]int{} // key → deletes that may have happened
	for i := range h.Ops {
		op := &h.Ops[i]
		if op.WriteID != "" {
			written[op.WriteID] = true
		}
		out := op.Outcome()
		if op.Kind == Delete && (out == OK || out == Unknown) {
			deletes[op.Key]++
		}
		if op.Undecodable {
			rp.add(Acknowledged, "%s: a success whose body is not an object", op)
		}
		if op.WriteID != "" && out != OK {
			// A write refused (or never sent) is not in etcd; one whose
			// answer was lost is, if at all, where it was sent.
			if c, ok := t.Written(op.WriteID); ok && (out != Unknown || c.Key != op.Key) {
				rp.add(Acknowledged, "%s: etcd holds its write at %s revision %d", op, c.Key, c.Rev)
			}
		}
		if out != OK {
			continue
		}
		switch {
		case op.Kind == Delete:
			if v, ok := t.After(op.Key, op.IfRev); !ok || !v.Deleted {
				rp.add(Acknowledged, "%s: acknowledged, but etcd holds no deletion after revision %d (next: %+v)", op, op.IfRev, v)
			}
		case op.Obj == nil:
			rp.add(Acknowledged, "%s: a success without the object", op)
		default:
			if op.Kind.IsWrite() && op.Obj.WriteID != op.WriteID {
				rp.add(Acknowledged, "%s: the answer is not the state the write made", op)
			}
			checkObj(t, *op.Obj, rp, op.String())
		}
	}
	for i := range h.Lists {
		l := &h.Lists[i]
		for _, it := range l.Items {
			checkObj(t, it, rp, fmt.Sprintf("list %d of %s", l.ID, l.Scope))
		}
	}
	for _, c := range t.twice {
		first, _ := t.Written(c.WriteID)
		rp.add(Acknowledged, "write %s applied twice: %s at revision %d, %s at revision %d", c.WriteID, first.Key, first.Rev, c.Key, c.Rev)
	}
	foreign := map[string]bool{}
	for _, k := range t.Foreign {
		foreign[k] = true
	}
	for _, c := range t.Changes {
		if c.Deleted || foreign[c.Key] {
			continue
		}
		if !written[c.WriteID] {
			rp.add(Acknowledged, "etcd holds %s at revision %d (write %q), which no request of the traffic wrote", c.Key, c.Rev, c.WriteID)
		}
	}
	dels := map[string]int{}
	for _, c := range t.Changes {
		if c.Deleted {
			dels[c.Key]++
		}
	}
	for k, n := range dels {
		if n > deletes[k] && !foreign[k] {
			rp.add(Acknowledged, "etcd deleted %s %d times, but only %d deletes may have taken effect", k, n, deletes[k])
		}
	}
}

// checkObj checks that o is the state etcd holds of its key at its
// revision.
func checkObj(t *Truth, o Obj, rp *reporter, where string) {
	v, ok := t.WrittenAt(o.Key, o.Rev)
	switch {
	case !ok:
		rp.add(Acknowledged, "%s: %s: etcd wrote no state of %s at revision %d", where, o, o.Key, o.Rev)
	case v.Deleted:
		rp.add(Acknowledged, "%s: %s: etcd deleted %s at revision %d", where, o, o.Key, o.Rev)
	case v.WriteID != o.WriteID || v.Group != o.Group:
		rp.add(Acknowledged, "%s: %s: etcd holds write %s (group %q) there", where, o, v.WriteID, v.Group)
	}
}
