package check

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// checkLists checks every list: all its pages at one resourceVersion, the
// items equal to etcd's state in scope at it, in key order, the
// resourceVersionMatch honoured, a consistent list no older than the
// writes acknowledged before it started, and a 410 only for a compacted
// resourceVersion.
func checkLists(h *History, t *Truth, a *acks, rp *reporter) {
	for i := range h.Lists {
		l := &h.Lists[i]
		what := fmt.Sprintf("list %d (client %d) of %s rv=%q match=%q limit=%d", l.ID, l.Client, l.Scope, l.RV, l.Match, l.Limit)
		if l.Undecodable {
			rp.add(Acknowledged, "%s: page %d is not a list (%s)", what, l.Pages+1, l.Err)
		}
		if l.Failed() {
			if l.Code == http.StatusGone && l.Pages == 0 && (l.RV == "" || l.RV == "0") {
				// No revision of the past was asked for.
				rp.add(Gone, "%s: answered 410 (%s)", what, l.Reason)
				continue
			}
			if l.Code == http.StatusGone && !t.Compacted(l.FailedRV, l.Return) {
				rp.add(Gone, "%s: page %d answered 410 (%s) for revision %d, which etcd had not compacted", what, l.Pages+1, l.Reason, l.FailedRV)
			}
			continue
		}
		for _, r := range l.PageRevs {
			if r != l.Rev {
				rp.add(ListState, "%s: its pages are at revisions %v", what, l.PageRevs)
				break
			}
		}
		asked, _ := strconv.ParseInt(l.RV, 10, 64)
		switch {
		case l.Match == "Exact" && l.Rev != asked:
			rp.add(ListState, "%s: an Exact list at revision %d", what, l.Rev)
		case (l.Match == "NotOlderThan" || l.Match == "" && asked > 0) && l.Rev < asked:
			// A resourceVersion other than 0 without a match means
			// NotOlderThan too.
			rp.add(ListState, "%s: a NotOlderThan list at the older revision %d", what, l.Rev)
		case l.RV == "":
			if f, ok := a.floor(l.Scope.Resource, l.Call); ok && l.Rev < f {
				rp.add(ListState, "%s: a consistent list at revision %d, older than revision %d a write made before it started", what, l.Rev, f)
			}
		}
		if l.Rev > t.End {
			// The truth ends before it (the run stopped reading etcd): the
			// items were checked one by one.
			continue
		}
		want := t.State(l.Scope, l.Rev)
		if d := diffObjs(want, l.Items); d != "" {
			rp.add(ListState, "%s at revision %d: %s", what, l.Rev, d)
		}
		for j := 1; j < len(l.Items); j++ {
			if l.Items[j-1].Key >= l.Items[j].Key {
				rp.add(ListState, "%s: items out of key order (%s then %s)", what, l.Items[j-1].Key, l.Items[j].Key)
				break
			}
		}
	}
}

// diffObjs describes how got differs from want, as sets; "" if alike.
func diffObjs(want, got []Obj) string {
	w := map[string]Obj{}
	for _, o := range want {
		w[o.Key] = o
	}
	g := map[string]Obj{}
	var out []string
	for _, o := range got {
		if _, dup := g[o.Key]; dup {
			out = append(out, "twice "+o.String())
		}
		g[o.Key] = o
	}
	for _, o := range want {
		x, ok := g[o.Key]
		switch {
		case !ok:
			out = append(out, "missing "+o.String())
		case x != o:
			out = append(out, fmt.Sprintf("%s instead of %s", x, o))
		}
	}
	for _, o := range got {
		if _, ok := w[o.Key]; !ok {
			out = append(out, "extra "+o.String())
		}
	}
	if len(out) > 6 {
		out = append(out[:6], fmt.Sprintf("and %d more", len(out)-6))
	}
	return strings.Join(out, "; ")
}
