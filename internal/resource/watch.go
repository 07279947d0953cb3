package resource

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/crdserver/crdserver/internal/jsonraw"
	"github.com/crdserver/crdserver/internal/request"
	"github.com/crdserver/crdserver/internal/store"
)

// InitialEventsEndAnnotation marks the bookmark that ends the initial
// events of a streaming list (sendInitialEvents=true).
const InitialEventsEndAnnotation = "k8s.io/initial-events-end"

// preTimeoutBookmark is how long before a watch times out its last
// bookmark is sent.
const preTimeoutBookmark = 2 * time.Second

// watchBatch is the most events converted and written at once.
const watchBatch = 500

// watch streams the changes of a collection (or of one object, with a
// metadata.name field selector) from the watch cache.
func (c *call) watch() {
	opts, err := c.listOptions()
	if err != nil {
		c.fail(err)
		return
	}
	target, err := c.watchTarget()
	if err != nil {
		c.fail(err)
		return
	}
	if c.info.Name != "" {
		// GET .../watch/<resource>/<name>: the deprecated single-object watch.
		byName := fields.OneTermEqualSelector("metadata.name", c.info.Name)
		if opts.FieldSelector != nil {
			byName = fields.AndSelectors(opts.FieldSelector, byName)
		}
		opts.FieldSelector = byName
	}
	wo, initialEnd, post, err := c.watchStart(opts)
	if err != nil {
		c.fail(c.storeError(err, ""))
		return
	}
	w, err := c.res.Cache.Watch(c.ctx, wo)
	var tooOld *store.TooOldError
	var tooLarge *store.TooLargeError
	if err != nil && !errors.As(err, &tooOld) && !errors.As(err, &tooLarge) {
		c.fail(c.storeError(err, ""))
		return
	}
	s := c.startStream(target, opts.AllowWatchBookmarks)
	if post {
		s.sel = newSelection(opts, c.ver.FieldLabels)
	}
	if err != nil {
		// History is gone, or the version is not reached yet: one ERROR
		// event, as the watch cache sends it, then the end of the stream.
		s.fail(c.storeError(err, ""))
		return
	}
	defer w.Stop()
	if !s.initial(w.Initial, initialEnd, w.Rev) {
		return
	}
	for i := 0; i < len(w.Replay); i += watchBatch {
		if !s.emit(w.Replay[i:min(i+watchBatch, len(w.Replay))]) {
			return
		}
	}
	s.follow(w, c.watchTimeout(opts))
}

// watchTarget is what the events' objects are encoded as: the objects
// themselves, Tables, or metadata only.
func (c *call) watchTarget() (request.Target, error) {
	offer := c.offer(readOffer)
	offer.NoYAML = true
	target, err := request.Negotiate(c.r, offer)
	if err != nil {
		return target, err
	}
	if target.As == request.AsPartialObjectMetadataList {
		target.As = request.AsPartialObjectMetadata
	}
	if target.As == request.AsTable {
		if _, err := c.includeObject(); err != nil {
			return target, err
		}
	}
	return target, nil
}

// watchTimeout is how long the watch lasts: timeoutSeconds, or a random
// time between the minimum request timeout and twice it.
func (c *call) watchTimeout(opts *metainternalversion.ListOptions) time.Duration {
	if opts.TimeoutSeconds != nil && *opts.TimeoutSeconds > 0 {
		return time.Duration(*opts.TimeoutSeconds) * time.Second
	}
	timeout := c.h.MinRequestTimeout
	if timeout <= 0 {
		timeout = 30 * time.Minute
	}
	return timeout + time.Duration(rand.Int64N(int64(timeout)))
}

// watchStart decides where a watch starts, from resourceVersion and
// sendInitialEvents as Kubernetes' API concepts say: from the current state
// (with synthetic ADDED events) or after a resourceVersion. initialEnd says
// whether the initial events end with the bookmark that says so; post,
// whether the cache's filter passes on events whose objects are matched
// once converted (see selection).
func (c *call) watchStart(opts *metainternalversion.ListOptions) (wo store.WatchOptions, initialEnd, post bool, err error) {
	cache := c.res.Cache
	rv, _ := ParseResourceVersion(opts.ResourceVersion)
	keep, post := c.filter(newSelection(opts, c.ver.FieldLabels))
	wo = store.WatchOptions{Namespace: c.namespace, Filter: keep, Bookmarks: opts.AllowWatchBookmarks}
	// fresh waits for the cache to reach rv, or a consistent read's revision
	// when rv is unset.
	fresh := func(rv int64) error {
		if opts.ResourceVersion == "" {
			if rv, err = c.h.Store.CurrentRevision(c.ctx); err != nil {
				return err
			}
		}
		return cache.WaitFresh(c.ctx, rv)
	}
	switch {
	case opts.SendInitialEvents != nil:
		// A streaming list (or a watch from "now" when false): the state must
		// be at least as new as a consistent read or the given version.
		if err := fresh(rv); err != nil {
			return wo, false, false, err
		}
		if *opts.SendInitialEvents {
			wo.FromState = true
			initialEnd = opts.AllowWatchBookmarks
		} else {
			wo.Rev = cache.Revision()
		}
	case opts.ResourceVersion == "":
		if err := fresh(0); err != nil {
			return wo, false, false, err
		}
		wo.FromState = true
	case rv == 0:
		wo.FromState = true
	default:
		wo.Rev = rv
	}
	if wo.FromState {
		cache.Reading()
	}
	return wo, initialEnd, post, nil
}

// stream writes the events of one watch to the client.
type stream struct {
	c         *call
	target    request.Target
	bookmarks bool
	flusher   http.Flusher
	buf       bytes.Buffer
	// headersSent: Tables carry their column definitions in the first
	// event only.
	headersSent bool
	// sel, when set, matches the events' objects once converted: the
	// cache passed on those it could not match as cached.
	sel *selection
}

// startStream sends the response headers of a watch.
func (c *call) startStream(target request.Target, bookmarks bool) *stream {
	s := &stream{c: c, target: target, bookmarks: bookmarks}
	s.flusher, _ = c.w.(http.Flusher)
	h := c.w.Header()
	h.Set("Content-Type", "application/json")
	if target.Format == request.FormatProtobuf {
		h.Set("Content-Type", request.ProtobufWatch)
	}
	h.Set("Cache-Control", "no-cache, private")
	c.w.WriteHeader(http.StatusOK)
	if s.flusher != nil {
		s.flusher.Flush()
	}
	return s
}

// event adds one event to the buffer, its object encoded for the target.
func (s *stream) event(typ string, obj []byte) error {
	if s.target.As != request.AsObject {
		out, err := s.c.watchTransform(s.target, obj, s.headersSent)
		if err != nil {
			return err
		}
		s.headersSent = true
		obj = out
	}
	if s.target.Format == request.FormatProtobuf {
		frame, err := request.ProtobufWatchEvent(typ, obj)
		if err != nil {
			return apierrors.NewInternalError(err)
		}
		s.buf.Write(frame)
		return nil
	}
	writeEvent(&s.buf, typ, obj)
	return nil
}

// send writes out the buffer; false means the client is gone.
func (s *stream) send() bool {
	_, err := s.c.w.Write(s.buf.Bytes())
	s.buf.Reset()
	if err != nil {
		return false
	}
	if s.flusher != nil {
		s.flusher.Flush()
	}
	return true
}

// fail sends an ERROR event and what is buffered before it: the stream
// ends.
func (s *stream) fail(err error) {
	st := request.Status(err)
	st.Kind, st.APIVersion = "Status", "v1"
	if s.target.Format == request.FormatProtobuf {
		if frame, err := request.ProtobufWatchEvent("ERROR", mustJSON(st)); err == nil {
			s.buf.Write(frame)
		}
	} else {
		writeEvent(&s.buf, "ERROR", mustJSON(st))
	}
	s.send()
}

// initial sends the initial state as synthetic ADDED events, converted in
// batches, then the bookmark that ends it if asked for.
func (s *stream) initial(items []*store.Item, end bool, rev int64) bool {
	for i := 0; i < len(items); i += watchBatch {
		batch := items[i:min(i+watchBatch, len(items))]
		out, err := s.c.convertItems(batch)
		if err != nil {
			s.fail(err)
			return false
		}
		for j, o := range out {
			if s.sel != nil && !s.sel.matchServed(batch[j], o) {
				continue
			}
			if err := s.event(string(store.Added), o); err != nil {
				s.fail(err)
				return false
			}
		}
		if !s.send() {
			return false
		}
	}
	if !end {
		return true
	}
	if err := s.event(string(store.Bookmark), s.c.bookmarkObject(rev, true)); err != nil {
		s.fail(err)
		return false
	}
	return s.send()
}

// emit sends events in order, their objects converted in one batch.
func (s *stream) emit(evs []store.Event) bool {
	var items []*store.Item
	for _, ev := range evs {
		if ev.Type == store.Bookmark {
			continue
		}
		items = append(items, ev.Item)
		if s.sel != nil && ev.Type == store.Modified {
			items = append(items, ev.Prev)
		}
	}
	out, err := s.c.convertItems(items)
	if err != nil {
		s.fail(err)
		return false
	}
	for _, ev := range evs {
		if ev.Type == store.Bookmark {
			if s.bookmarks {
				if err := s.event(string(store.Bookmark), s.c.bookmarkObject(ev.Rev, false)); err != nil {
					s.fail(err)
					return false
				}
			}
			continue
		}
		typ, obj := ev.Type, out[0]
		out = out[1:]
		if s.sel != nil {
			var prev []byte
			if ev.Type == store.Modified {
				prev, out = out[0], out[1:]
			}
			var ok bool
			if typ, obj, ok = s.translate(ev, obj, prev); !ok {
				continue
			}
		}
		if err := s.event(string(typ), obj); err != nil {
			s.fail(err)
			return false
		}
	}
	return s.send()
}

// translate matches an event the cache passed on (its objects matched or
// not known to) on its objects as served, obj and, for MODIFIED, prev, as
// the cache translates events for its filters: an object that stops
// matching is DELETED (with its previous content at the event's revision),
// one that starts matching is ADDED. False: the watch does not see it.
func (s *stream) translate(ev store.Event, obj, prev []byte) (store.EventType, []byte, bool) {
	cur := s.sel.matchServed(ev.Item, obj)
	if ev.Type != store.Modified {
		// ADDED: it did not match before; DELETED: obj is its last state.
		return ev.Type, obj, cur
	}
	old := s.sel.matchServed(ev.Prev, prev)
	switch {
	case cur && old:
		return store.Modified, obj, true
	case cur:
		return store.Added, obj, true
	case old:
		gone, err := jsonraw.SetResourceVersion(prev, ev.Rev)
		if err != nil {
			gone = prev
		}
		return store.Deleted, gone, true
	}
	return "", nil, false
}

// follow sends live events, a batch at a time, until the watch times out,
// the client goes, the cache ends the watch or the server shuts down.
func (s *stream) follow(w *store.Watcher, timeout time.Duration) {
	var batch []store.Event
	// emitNext writes up to a batch of the events waiting for this
	// watcher: how many, and false when the stream is over.
	emitNext := func() (int, bool) {
		batch = w.Next(batch[:0], watchBatch)
		n := len(batch)
		ok := n == 0 || s.emit(batch)
		clear(batch)
		return n, ok
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	// A bookmark 2 s before the watch times out, as kube-apiserver's watch
	// cache sends it: the client resumes from the newest revision.
	var preTimeout <-chan time.Time
	if s.bookmarks && timeout > preTimeoutBookmark {
		t := time.NewTimer(timeout - preTimeoutBookmark)
		defer t.Stop()
		preTimeout = t.C
	}
	for {
		select {
		case <-preTimeout:
			w.Bookmark()
		case <-w.Ready():
			if _, ok := emitNext(); !ok {
				return
			}
		case <-w.Done():
			// Send what was delivered before the cache ended the watch,
			// then why it ended, if the client must relist (410).
			for {
				n, ok := emitNext()
				if !ok {
					return
				}
				if n == 0 {
					break
				}
			}
			if err := w.Err(); err != nil {
				s.fail(s.c.storeError(err, ""))
			}
			return
		case <-timer.C:
			return
		case <-s.c.ctx.Done():
			return
		case <-s.c.h.Stopping:
			return
		}
	}
}

func writeEvent(b *bytes.Buffer, typ string, obj []byte) {
	b.WriteString(`{"type":"`)
	b.WriteString(typ)
	b.WriteString(`","object":`)
	b.Write(obj)
	b.WriteString("}\n")
}

// bookmarkObject is an object of the watched kind that carries only a
// resourceVersion (and, at the end of initial events, the annotation
// that says so).
func (c *call) bookmarkObject(rev int64, initialEnd bool) []byte {
	md := map[string]any{"resourceVersion": itoa(rev)}
	if initialEnd {
		md["annotations"] = map[string]string{InitialEventsEndAnnotation: "true"}
	}
	return mustJSON(map[string]any{"apiVersion": c.apiVersion(), "kind": c.res.Kind, "metadata": md})
}
