package robustness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/crdserver/crdserver/e2e/robustness/check"
)

// traffic drives requests at the replicas as Kubernetes clients do, and
// records every request and answer.
type traffic struct {
	rc       *recorder
	replicas []*replica
	hc       *http.Client // requests, each bounded in time
	watchHC  *http.Client // watches, bounded by their context
	limiter  *rate.Limiter
	seed     uint64
}

// client is one of the traffic's request loops, talking to one replica.
type client struct {
	t       *traffic
	id      int
	replica int
	rng     *rand.Rand
	known   map[string]int64 // key → the resourceVersion last seen
	lastRev int64            // the newest resourceVersion this client saw
	// seen are resourceVersions this client saw, oldest first (a few
	// seconds' worth), for reads at a revision of the past.
	seen []int64
	seq  int
}

func (t *traffic) newClient(id int) *client {
	return &client{t: t, id: id, replica: id % len(t.replicas), rng: rand.New(rand.NewPCG(t.seed, uint64(id))), known: map[string]int64{}}
}

func (c *client) base() string { return c.t.replicas[c.replica].url }

// requestTimeout bounds one request: a stopped replica or a partitioned
// etcd make requests wait; the answer is then unknown.
const requestTimeout = 8 * time.Second

// run makes requests until ctx ends.
func (c *client) run(ctx context.Context) {
	for ctx.Err() == nil {
		if err := c.t.limiter.Wait(ctx); err != nil {
			return
		}
		res := resources[c.rng.IntN(len(resources))]
		version := res.versions[c.rng.IntN(len(res.versions))]
		ns := namespaces[c.rng.IntN(len(namespaces))]
		name := objNames[c.rng.IntN(len(objNames))]
		switch n := c.rng.IntN(100); {
		case n < 18:
			c.op(ctx, check.Get, res, version, ns, name)
		case n < 24:
			c.op(ctx, check.GetStale, res, version, ns, name)
		case n < 34:
			c.op(ctx, check.Create, res, version, ns, name)
		case n < 48:
			c.op(ctx, check.Update, res, version, ns, name)
		case n < 58:
			c.op(ctx, check.Apply, res, version, ns, name)
		case n < 68:
			c.op(ctx, check.Patch, res, version, ns, name)
		case n < 78:
			c.op(ctx, check.Delete, res, version, ns, name)
		default:
			c.randomList(ctx, res, version)
		}
	}
}

func (c *client) see(rev int64) {
	if rev > c.lastRev {
		c.seen = append(c.seen, rev)
		if len(c.seen) > 200 {
			c.seen = append(c.seen[:0], c.seen[100:]...)
		}
	}
	c.lastRev = max(c.lastRev, rev)
}

// pastRev is a resourceVersion this client saw: the newest, or one of a
// few seconds ago (which a compaction may have removed).
func (c *client) pastRev() int64 {
	if len(c.seen) == 0 || c.rng.IntN(2) == 0 {
		return c.lastRev
	}
	return c.seen[c.rng.IntN(len(c.seen))]
}

// op makes one request on one object. An update or a delete needs the
// object's resourceVersion: a client that knows none reads it first.
func (c *client) op(ctx context.Context, kind check.OpKind, res *resource, version, ns, name string) {
	key := check.Key(res.name, ns, name)
	op := check.Op{ID: c.t.rc.nextID(), Client: c.id, Kind: kind, Key: key}
	if kind == check.Update || kind == check.Delete {
		if c.known[key] == 0 {
			c.op(ctx, check.Get, res, version, ns, name)
			if c.known[key] == 0 || ctx.Err() != nil {
				return
			}
		}
		op.IfRev = c.known[key]
	}
	if kind.IsWrite() && kind != check.Delete {
		c.seq++
		op.WriteID = fmt.Sprintf("c%d-%d", c.id, c.seq)
		op.Group = groups[c.rng.IntN(len(groups))]
	}
	var method, path, ctype string
	var body []byte
	switch kind {
	case check.Create:
		method, path, ctype = http.MethodPost, res.path(version, ns, ""), "application/json"
		body = res.object(version, ns, name, op.WriteID, op.Group, 0)
	case check.Update:
		method, path, ctype = http.MethodPut, res.path(version, ns, name), "application/json"
		body = res.object(version, ns, name, op.WriteID, op.Group, op.IfRev)
	case check.Apply:
		method, path, ctype = http.MethodPatch, res.path(version, ns, name)+query("fieldManager", fmt.Sprintf("robustness-%d", c.id), "force", "true"), "application/apply-patch+yaml"
		body = res.object(version, ns, name, op.WriteID, op.Group, 0)
	case check.Patch:
		method, path, ctype = http.MethodPatch, res.path(version, ns, name), "application/merge-patch+json"
		body = res.patch(version, op.WriteID, op.Group)
	case check.Delete:
		method, path, ctype = http.MethodDelete, res.path(version, ns, name), "application/json"
		body = fmt.Appendf(nil, `{"kind":"DeleteOptions","apiVersion":"v1","preconditions":{"resourceVersion":"%d"}}`, op.IfRev)
	case check.Get:
		method, path = http.MethodGet, res.path(version, ns, name)
	case check.GetStale:
		method, path = http.MethodGet, res.path(version, ns, name)+query("resourceVersion", "0")
	}
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	op.Call = c.t.rc.now()
	a := do(rctx, c.t.hc, method, c.base(), path, ctype, body)
	op.Return = c.t.rc.now()
	cancel()
	if a.err != nil && ctx.Err() != nil && !kind.IsWrite() {
		return // the run ended it
	}
	op.Code, op.Err, op.Unsent = a.code, shortErr(a.err), a.unsent
	if a.err == nil {
		var w wireObject
		err := json.Unmarshal(a.body, &w)
		switch {
		case w.Kind == "Status":
			op.Reason, op.Message, op.Named = w.Reason, w.Message, w.Details.Name
		case a.code >= 200 && a.code < 300 && (err != nil || w.Metadata.Name != name):
			op.Undecodable, op.Err = true, fmt.Sprintf("%v: %.200s", err, a.body)
		case a.code >= 200 && a.code < 300 && kind != check.Delete:
			o := w.obj(res.name)
			op.Obj = &o
		}
	}
	switch out := op.Outcome(); {
	case op.Obj != nil:
		c.known[key] = op.Obj.Rev
		c.see(op.Obj.Rev)
	case kind == check.Delete && out == check.OK, out == check.NotFound:
		c.known[key] = 0
	case out == check.Conflict || out == check.Unknown:
		c.known[key] = 0 // read it again before the next update
	}
	c.t.rc.addOp(op)
}

// randomList lists one resource in a random scope, version and way.
func (c *client) randomList(ctx context.Context, res *resource, version string) {
	s := c.randomScope(res)
	limit := []int{0, 0, 2, 4}[c.rng.IntN(4)]
	switch n := c.rng.IntN(10); {
	case n < 4:
		c.list(ctx, res, version, s, "", "", limit)
	case n < 6:
		c.list(ctx, res, version, s, "0", "", limit)
	case n < 7 && c.lastRev > 0:
		c.list(ctx, res, version, s, strconv.FormatInt(c.lastRev, 10), "NotOlderThan", limit)
	case n < 8 && c.lastRev > 0:
		// A resourceVersion without a match: no older than it (a limit
		// makes it an exact read, from etcd).
		c.list(ctx, res, version, s, strconv.FormatInt(c.lastRev, 10), "", limit)
	case c.lastRev > 0:
		c.list(ctx, res, version, s, strconv.FormatInt(c.pastRev(), 10), "Exact", limit)
	default:
		c.list(ctx, res, version, s, "", "", limit)
	}
}

func (c *client) randomScope(res *resource) check.Scope {
	s := check.Scope{Resource: res.name}
	if n := c.rng.IntN(3); n > 0 {
		s.Namespace = namespaces[n-1]
	}
	switch n := c.rng.IntN(10); {
	case n < 3:
		s.Group = groups[c.rng.IntN(len(groups))]
	case n < 4:
		s.Name = objNames[c.rng.IntN(len(objNames))]
	}
	return s
}

// list reads a collection page by page, and returns the list recorded.
func (c *client) list(ctx context.Context, res *resource, version string, s check.Scope, rv, match string, limit int) check.List {
	l := check.List{ID: c.t.rc.nextID(), Client: c.id, Scope: s, RV: rv, Match: match, Limit: limit}
	base := res.path(version, s.Namespace, "")
	sel := selectors(s)
	lim := ""
	if limit > 0 {
		lim = strconv.Itoa(limit)
	}
	path := base + query(append(sel, "limit", lim, "resourceVersion", rv, "resourceVersionMatch", match)...)
	l.Call = c.t.rc.now()
	for {
		rctx, cancel := context.WithTimeout(ctx, requestTimeout)
		a := do(rctx, c.t.hc, http.MethodGet, c.base(), path, "", nil)
		cancel()
		l.Return = c.t.rc.now()
		if a.err != nil || a.code != http.StatusOK {
			l.Code, l.Err = a.code, shortErr(a.err)
			l.Reason, _ = decodeStatus(a.body)
			if l.Pages == 0 {
				l.FailedRV, _ = strconv.ParseInt(rv, 10, 64)
			} else {
				l.FailedRV = l.Rev
			}
			break
		}
		var page struct {
			Metadata struct {
				ResourceVersion string `json:"resourceVersion"`
				Continue        string `json:"continue"`
			} `json:"metadata"`
			Items []wireObject `json:"items"`
		}
		if err := json.Unmarshal(a.body, &page); err != nil {
			l.Code, l.Err, l.Undecodable = 0, "undecodable list: "+shortErr(err), true
			break
		}
		rev, _ := strconv.ParseInt(page.Metadata.ResourceVersion, 10, 64)
		if l.Pages == 0 {
			l.Rev = rev
		}
		l.PageRevs = append(l.PageRevs, rev)
		l.Pages++
		for i := range page.Items {
			l.Items = append(l.Items, page.Items[i].obj(res.name))
		}
		if page.Metadata.Continue == "" {
			l.Code = http.StatusOK
			break
		}
		path = base + query(append(sel, "limit", lim, "continue", page.Metadata.Continue)...)
	}
	if ctx.Err() != nil && l.Code != http.StatusOK {
		return l // the run ended it
	}
	if l.Code == http.StatusOK {
		c.see(l.Rev)
	}
	c.t.rc.addList(l)
	return l
}

// watcher starts logical watches one after another until ctx ends: each
// lives a few seconds, over watch requests of a few seconds each, resumed
// on any replica from the last resourceVersion seen, as reflectors behind
// a load balancer resume.
func (c *client) watcher(ctx context.Context) {
	for ctx.Err() == nil {
		life := time.Duration(2000+c.rng.IntN(6000)) * time.Millisecond
		wctx, cancel := context.WithTimeout(ctx, life)
		c.logicalWatch(wctx)
		cancel()
	}
}

func (c *client) logicalWatch(ctx context.Context) {
	res := resources[c.rng.IntN(len(resources))]
	version := res.versions[c.rng.IntN(len(res.versions))]
	w := check.Watch{ID: c.t.rc.nextID(), Client: c.id, Scope: c.randomScope(res)}
	var from int64
	switch n := c.rng.IntN(10); {
	case n < 3:
		w.Mode, w.Consistent = check.WatchList, true
	case n < 4 && c.lastRev > 0:
		// A watch list no older than a revision this client saw.
		w.Mode, from = check.WatchList, c.lastRev
	case n < 8:
		l := c.list(ctx, res, version, w.Scope, "", "", 0)
		if l.Code != http.StatusOK {
			return
		}
		w.Mode, from = check.FromRV, l.Rev
	default:
		c.t.rc.mu.Lock()
		if k := len(c.t.rc.delivered); k > 0 {
			d := c.t.rc.delivered[c.rng.IntN(k)]
			w.ResumeOf, from = d.watch, d.rev
		}
		c.t.rc.mu.Unlock()
		if from == 0 {
			return
		}
		w.Mode = check.FromRV
	}
	defer func() { c.t.rc.addWatch(w) }()
	replica := c.replica
	initial := w.Mode == check.WatchList
	for ctx.Err() == nil {
		conn, last, gone := c.watchOnce(ctx, &w, res, version, replica, from, initial)
		w.Conns = append(w.Conns, conn)
		if gone || ctx.Err() != nil {
			return
		}
		if initial {
			if last == 0 {
				return // the initial events did not end: the informer starts over
			}
			initial = false
		}
		from = max(from, last)
		replica = c.rng.IntN(len(c.t.replicas))
		if len(conn.Events) == 0 {
			// Refused or cut off before anything came: wait a little, as
			// client-go's backoff does.
			select {
			case <-ctx.Done():
			case <-time.After(time.Duration(100+c.rng.IntN(200)) * time.Millisecond):
			}
		}
	}
}

// watchOnce makes one watch request and reads its events until it ends.
// It returns the conn, the newest resourceVersion it delivered (for a
// watch list, 0 unless its initial events ended), and whether the watch
// was told to relist (410).
func (c *client) watchOnce(ctx context.Context, w *check.Watch, res *resource, version string, replica int, from int64, initial bool) (conn check.Conn, last int64, gone bool) {
	timeout := 1 + c.rng.IntN(5)
	kv := append(selectors(w.Scope), "watch", "1", "allowWatchBookmarks", "true", "timeoutSeconds", strconv.Itoa(timeout))
	if initial {
		kv = append(kv, "sendInitialEvents", "true", "resourceVersionMatch", "NotOlderThan")
		conn.SendInitial = true
		if from > 0 {
			conn.RV = strconv.FormatInt(from, 10)
			kv = append(kv, "resourceVersion", conn.RV)
		}
	} else {
		conn.RV = strconv.FormatInt(from, 10)
		kv = append(kv, "resourceVersion", conn.RV)
	}
	conn.Replica = replica
	// A stopped replica never ends its watches: the client gives up some
	// time after the server should have.
	cctx, cancel := context.WithTimeout(ctx, time.Duration(timeout+10)*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(cctx, http.MethodGet, c.t.replicas[replica].url+res.path(version, w.Scope.Namespace, "")+query(kv...), nil)
	if err != nil {
		conn.Err = err.Error()
		return conn, 0, false
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "crdserver-robustness")
	conn.Call = c.t.rc.now()
	defer func() { conn.End = c.t.rc.now() }()
	resp, err := c.t.watchHC.Do(req)
	if err != nil {
		conn.Err = c.endErr(ctx, err)
		return conn, 0, false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var st wireObject
		_ = json.NewDecoder(resp.Body).Decode(&st)
		conn.Code, conn.Reason = resp.StatusCode, st.Reason
		return conn, 0, resp.StatusCode == http.StatusGone
	}
	dec := json.NewDecoder(resp.Body)
	for {
		var ev struct {
			Type   string          `json:"type"`
			Object json.RawMessage `json:"object"`
		}
		if err := dec.Decode(&ev); err != nil {
			if !errors.Is(err, io.EOF) {
				conn.Err = c.endErr(ctx, err)
			}
			return conn, last, false
		}
		var o wireObject
		if err := json.Unmarshal(ev.Object, &o); err != nil || ev.Type == "" {
			conn.Err, conn.Undecodable = fmt.Sprintf("undecodable event %q: %v", ev.Type, err), true
			return conn, last, false
		}
		if ev.Type == "ERROR" {
			conn.Code, conn.Reason = o.Code, o.Reason
			return conn, last, o.Code == http.StatusGone
		}
		e := check.WatchEvent{Type: ev.Type, Obj: o.obj(res.name), At: c.t.rc.now()}
		if ev.Type == "BOOKMARK" {
			e.Obj = check.Obj{Rev: e.Obj.Rev}
			e.InitialEnd = o.Metadata.Annotations["k8s.io/initial-events-end"] == "true"
		}
		conn.Events = append(conn.Events, e)
		if !initial || e.InitialEnd {
			initial = false
			last = max(last, e.Obj.Rev)
			c.see(e.Obj.Rev)
			c.t.rc.noteDelivered(w.ID, e.Obj.Rev)
		}
	}
}

// endErr names why a watch's stream ended: "stopped" when the client
// ended it.
func (c *client) endErr(ctx context.Context, err error) string {
	if ctx.Err() != nil {
		return "stopped"
	}
	return shortErr(err)
}

// runTraffic runs clients and watchers until ctx ends.
func (t *traffic) run(ctx context.Context, clients, watchers int) {
	var wg sync.WaitGroup
	for i := range clients {
		c := t.newClient(i)
		wg.Go(func() { c.run(ctx) })
	}
	for i := range watchers {
		c := t.newClient(clients + i)
		wg.Go(func() { c.watcher(ctx) })
	}
	wg.Wait()
}
