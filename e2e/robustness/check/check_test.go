package check_test

import (
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/crdserver/crdserver/e2e/robustness/check"
)

// check indexes the truth and checks the history against it.
func (s *sim) check(t *testing.T, o check.Options) check.Report {
	t.Helper()
	if err := s.tr.Index(); err != nil {
		t.Fatalf("truth: %v", err)
	}
	return check.Check(s.h, s.tr, o)
}

func TestCorrectHistoryPasses(t *testing.T) {
	for seed := uint64(1); seed <= 6; seed++ {
		cfg := defaultConfig(seed)
		cfg.Pairs = seed%3 != 0 // some runs as Kubernetes makes them: one object a revision
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			t.Parallel()
			s := simulate(cfg)
			r := s.check(t, check.Options{})
			for _, v := range r.Violations {
				t.Errorf("%s", v)
			}
			if len(r.Dropped) > 0 {
				t.Errorf("dropped violations: %v", r.Dropped)
			}
			st := r.Stats
			t.Logf("stats: %d changes; %d lists (%d failed); %d watches, %d conns, %d events, %d bookmarks; %d lost writes found in etcd",
				st.Changes, st.Lists, st.ListsFailed, st.Watches, st.Conns, st.Events, st.Bookmarks, st.Resolved)
			t.Logf("ops: %v", st.Ops)
			if st.Lists+st.ListsFailed != len(s.h.Lists) || st.Watches != len(s.h.Watches) || st.Changes != len(s.tr.Changes) {
				t.Errorf("stats %+v do not count the history", st)
			}
			cov := s.coverage()
			t.Logf("coverage: %v", cov)
			for what, n := range cov {
				if n == 0 && (what != "events of one revision" || cfg.Pairs) {
					t.Errorf("the history has no %s", what)
				}
			}
		})
	}
}

// coverage counts what the simulated history holds that the checks must
// get right, so that a passing run is known to have met each.
func (s *sim) coverage() map[string]int {
	cov := map[string]int{}
	for _, what := range []string{
		"lost write that happened", "lost write that did not", "lost delete", "refused request",
		"stale read of the cache", "paged list", "list failed with 410", "list failed with 410 on a later page",
		"consistent list", "Exact list", "NotOlderThan list", "resourceVersion=0 list", "list at a resourceVersion without match",
		"watch from a revision", "watch resumed from another watch's revision", "consistent watch list", "watch list at a resourceVersion",
		"reconnect", "transport error", "watch refused with 410", "resumption refused with 410",
		"DELETED on leaving the selector", "ADDED on entering the selector", "watch by name", "bookmark", "events of one revision",
	} {
		cov[what] = 0
	}
	for i := range s.h.Ops {
		op := &s.h.Ops[i]
		switch oc := op.Outcome(); {
		case oc == check.Unknown && op.Kind == check.Delete:
			cov["lost delete"]++
		case oc == check.Unknown && op.Kind.IsWrite():
			if s.written(op.WriteID) {
				cov["lost write that happened"]++
			} else {
				cov["lost write that did not"]++
			}
		case oc == check.Refused:
			cov["refused request"]++
		case oc == check.OK && op.Kind == check.GetStale:
			if v, ok := s.stateAt(op.Key, s.revAt(op.Call)); !ok || v.rev != op.Obj.Rev {
				cov["stale read of the cache"]++
			}
		}
	}
	for i := range s.h.Lists {
		l := &s.h.Lists[i]
		switch {
		case l.Code == http.StatusGone && l.Pages > 0:
			cov["list failed with 410 on a later page"]++
		case l.Code == http.StatusGone:
			cov["list failed with 410"]++
		case l.RV == "":
			cov["consistent list"]++
		case l.RV == "0":
			cov["resourceVersion=0 list"]++
		case l.Match == "":
			cov["list at a resourceVersion without match"]++
		default:
			cov[l.Match+" list"]++
		}
		if len(l.PageRevs) > 1 {
			cov["paged list"]++
		}
	}
	for wi := range s.h.Watches {
		w := &s.h.Watches[wi]
		switch {
		case w.ResumeOf != 0:
			cov["watch resumed from another watch's revision"]++
		case w.Mode == check.FromRV:
			cov["watch from a revision"]++
		case w.Consistent:
			cov["consistent watch list"]++
		default:
			cov["watch list at a resourceVersion"]++
		}
		if w.Scope.Name != "" {
			cov["watch by name"]++
		}
		for ci, c := range w.Conns {
			if ci > 0 {
				cov["reconnect"]++
			}
			if c.Err != "" {
				cov["transport error"]++
			}
			if c.Code == http.StatusGone && ci == 0 {
				cov["watch refused with 410"]++
			} else if c.Code == http.StatusGone {
				cov["resumption refused with 410"]++
			}
		}
		ps := s.delivered(wi)
		for i, p := range ps {
			e := s.ev(p)
			switch {
			case e.Type == "BOOKMARK":
				cov["bookmark"]++
				continue
			case e.Type == "DELETED" && !s.deletedAt(e.Obj.Key, e.Obj.Rev):
				cov["DELETED on leaving the selector"]++
			case e.Type == "ADDED" && s.existedBefore(e.Obj.Key, e.Obj.Rev):
				cov["ADDED on entering the selector"]++
			}
			if i > 0 && s.ev(ps[i-1]).Type != "BOOKMARK" && s.ev(ps[i-1]).Obj.Rev == e.Obj.Rev {
				cov["events of one revision"]++
			}
		}
	}
	return cov
}

// written reports whether etcd holds a state written by writeID.
func (s *sim) written(writeID string) bool {
	for _, c := range s.log {
		if c.writeID == writeID {
			return true
		}
	}
	return false
}

func (s *sim) deletedAt(key string, rev int64) bool {
	for _, v := range s.vers[key] {
		if v.rev == rev {
			return v.deleted
		}
	}
	return false
}

func (s *sim) existedBefore(key string, rev int64) bool {
	_, ok := s.stateAt(key, rev-1)
	return ok
}

// TestVisualization: a history that is not linearizable, checked with
// VisualizeDir, leaves porcupine's HTML page of the object.
func TestVisualization(t *testing.T) {
	s := simulate(defaultConfig(1))
	staleRead(t, s)
	dir := t.TempDir()
	r := s.check(t, check.Options{VisualizeDir: dir})
	assertCaught(t, r, check.Linearizable)
	if len(r.Visualizations) == 0 {
		t.Fatalf("no visualization written to %s", dir)
	}
	for key, path := range r.Visualizations {
		if !strings.HasPrefix(path, dir) || !strings.HasSuffix(path, ".html") {
			t.Errorf("%s: visualization at %s, not an HTML file in %s", key, path, dir)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		if !strings.Contains(strings.ToLower(string(b)), "<html") {
			t.Errorf("%s: %s is not an HTML page", key, path)
		}
	}
	// Without VisualizeDir nothing is written.
	if r := s.check(t, check.Options{}); len(r.Visualizations) != 0 {
		t.Errorf("visualizations without VisualizeDir: %v", r.Visualizations)
	}
}

// TestMaxPerGuarantee: past the bound, violations are counted, not listed.
func TestMaxPerGuarantee(t *testing.T) {
	s := simulate(defaultConfig(2))
	dropped := 0
	for wi := range s.h.Watches {
		w := &s.h.Watches[wi]
		if w.ResumeOf != 0 {
			continue
		}
		// Keep each conn's last event and bookmarks: drop the rest.
		for ci := range w.Conns {
			c := &w.Conns[ci]
			first := 0
			if ci == 0 {
				first = initialEnd(w)
			}
			var kept []check.WatchEvent
			kept = append(kept, c.Events[:first]...)
			for ei := first; ei < len(c.Events); ei++ {
				if e := c.Events[ei]; e.Type == "BOOKMARK" || ei == len(c.Events)-1 {
					kept = append(kept, e)
				} else {
					dropped++
				}
			}
			c.Events = kept
		}
	}
	if dropped < 3 {
		t.Fatalf("only %d events to drop", dropped)
	}
	r := s.check(t, check.Options{MaxPerGuarantee: 1})
	n := 0
	for _, v := range r.Violations {
		if v.Guarantee == check.Reliable {
			n++
		}
	}
	if n != 1 || r.Dropped[check.Reliable] == 0 {
		t.Fatalf("%d reliable violations listed, %d dropped; want 1 listed and the rest dropped", n, r.Dropped[check.Reliable])
	}
	t.Logf("listed %d, dropped %v", len(r.Violations), r.Dropped)
}

func TestOutcome(t *testing.T) {
	for _, c := range []struct {
		code   int
		reason string
		want   check.Outcome
	}{
		{0, "", check.Unknown},
		{http.StatusOK, "", check.OK},
		{http.StatusCreated, "", check.OK},
		{http.StatusNotFound, "NotFound", check.NotFound},
		{http.StatusNotFound, "", check.Refused}, // the resource is not served
		{http.StatusConflict, "AlreadyExists", check.AlreadyExists},
		{http.StatusConflict, "Conflict", check.Conflict},
		{http.StatusTooManyRequests, "TooManyRequests", check.Refused},
		{http.StatusUnprocessableEntity, "Invalid", check.Refused},
		{http.StatusInternalServerError, "InternalError", check.Unknown},
		{http.StatusGatewayTimeout, "Timeout", check.Unknown},
	} {
		op := check.Op{Key: "widgets/ns/x", Code: c.code, Reason: c.reason}
		if c.reason == "NotFound" {
			op.Named = "x"
		}
		if got := op.Outcome(); got != c.want {
			t.Errorf("%d %s: %s, want %s", c.code, c.reason, got, c.want)
		}
	}
	if op := (check.Op{Code: 0, Unsent: true}); op.Outcome() != check.Refused {
		t.Errorf("a request never sent: %s", op.Outcome())
	}
}

func TestIndexRefusesDisorder(t *testing.T) {
	for _, c := range []struct {
		name string
		tr   check.Truth
	}{
		{"changes out of revision order", check.Truth{Start: 1, Changes: []check.Change{
			{Key: "a/b/c", Version: check.Version{Rev: 3, WriteID: "w1"}},
			{Key: "a/b/d", Version: check.Version{Rev: 2, WriteID: "w2"}},
		}}},
		{"a key changed twice at one revision", check.Truth{Start: 1, Changes: []check.Change{
			{Key: "a/b/c", Version: check.Version{Rev: 2, WriteID: "w1"}},
			{Key: "a/b/c", Version: check.Version{Rev: 2, WriteID: "w2"}},
		}}},
	} {
		if err := c.tr.Index(); err == nil {
			t.Errorf("%s: Index accepted it", c.name)
		}
	}
	ok := check.Truth{Start: 1, End: 3, Changes: []check.Change{
		{Key: "a/b/c", Version: check.Version{Rev: 2, WriteID: "w1"}},
		{Key: "a/b/d", Version: check.Version{Rev: 2, WriteID: "w2"}},
		{Key: "a/b/c", Version: check.Version{Rev: 3, Deleted: true}},
	}}
	if err := ok.Index(); err != nil {
		t.Errorf("two keys at one revision: %v", err)
	}
}

// TestEveryGuaranteeIsDoctored: each guarantee has a doctoring that must
// be caught as its violation.
func TestEveryGuaranteeIsDoctored(t *testing.T) {
	doctored := map[string]bool{}
	for _, d := range doctorings {
		doctored[d.want] = true
	}
	for _, g := range check.Guarantees {
		if !doctored[g] {
			t.Errorf("no doctoring proves %s can fail", g)
		}
	}
}
