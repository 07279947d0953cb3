package resource

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/crdserver/crdserver/internal/request"
	"github.com/crdserver/crdserver/internal/store"
	"k8s.io/apimachinery/pkg/fields"
)

// InitialEventsEndAnnotation marks the bookmark that ends the initial
// events of a streaming list (sendInitialEvents=true).
const InitialEventsEndAnnotation = "k8s.io/initial-events-end"

// watch streams the changes of a collection (or of one object, with a
// metadata.name field selector) from the watch cache.
func (c *call) watch() {
	opts, err := c.listOptions()
	if err != nil {
		c.fail(err)
		return
	}
	offer := readOffer
	offer.NoYAML = true
	target, err := request.Negotiate(c.r, offer)
	if err != nil {
		c.fail(err)
		return
	}
	if target.As == request.AsPartialObjectMetadataList {
		target.As = request.AsPartialObjectMetadata
	}
	if target.As == request.AsTable {
		if _, err := c.includeObject(); err != nil {
			c.fail(err)
			return
		}
	}
	if c.info.Name != "" {
		// GET .../watch/<resource>/<name>: the deprecated single-object watch.
		byName := fields.OneTermEqualSelector("metadata.name", c.info.Name)
		if opts.FieldSelector != nil {
			byName = fields.AndSelectors(opts.FieldSelector, byName)
		}
		opts.FieldSelector = byName
	}
	timeout := c.h.MinRequestTimeout
	if timeout <= 0 {
		timeout = 30 * time.Minute
	}
	timeout += time.Duration(rand.Int64N(int64(timeout)))
	if opts.TimeoutSeconds != nil && *opts.TimeoutSeconds > 0 {
		timeout = time.Duration(*opts.TimeoutSeconds) * time.Second
	}

	cache := c.res.Cache
	rv, _ := ParseResourceVersion(opts.ResourceVersion)
	wo := store.WatchOptions{Namespace: c.namespace, Filter: filter(opts), Bookmarks: opts.AllowWatchBookmarks}
	initialEnd := false
	switch {
	case opts.SendInitialEvents != nil:
		// A streaming list (or a watch from "now" when false): the state must
		// be at least as new as a consistent read or the given version.
		want := rv
		if opts.ResourceVersion == "" {
			if want, err = c.h.Store.CurrentRevision(c.ctx); err != nil {
				c.fail(c.storeError(err, ""))
				return
			}
		}
		if err := cache.WaitFresh(c.ctx, want); err != nil {
			c.fail(c.storeError(err, ""))
			return
		}
		if *opts.SendInitialEvents {
			wo.FromState = true
			initialEnd = opts.AllowWatchBookmarks
		} else {
			wo.Rev = cache.Revision()
		}
	case opts.ResourceVersion == "":
		cur, err := c.h.Store.CurrentRevision(c.ctx)
		if err != nil {
			c.fail(c.storeError(err, ""))
			return
		}
		if err := cache.WaitFresh(c.ctx, cur); err != nil {
			c.fail(c.storeError(err, ""))
			return
		}
		wo.FromState = true
	case rv == 0:
		wo.FromState = true
	default:
		wo.Rev = rv
	}

	w, err := cache.Watch(c.ctx, wo)
	var tooOld *store.TooOldError
	var tooLarge *store.TooLargeError
	if err != nil && !errors.As(err, &tooOld) && !errors.As(err, &tooLarge) {
		c.fail(c.storeError(err, ""))
		return
	}
	var initial []*store.Item
	var replay []store.Event
	var startRev int64
	if w != nil {
		defer w.Stop()
		initial, replay, startRev = w.Initial, w.Replay, w.Rev
	}

	flusher, _ := c.w.(http.Flusher)
	h := c.w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-cache, private")
	c.w.WriteHeader(http.StatusOK)
	if flusher != nil {
		flusher.Flush()
	}
	var buf bytes.Buffer
	// Tables carry their column definitions in the first event only.
	headersSent := false
	event := func(typ string, obj []byte) error {
		if target.As != request.AsObject {
			out, err := c.watchTransform(target, obj, headersSent)
			if err != nil {
				return err
			}
			headersSent = true
			obj = out
		}
		writeEvent(&buf, typ, obj)
		return nil
	}
	send := func() bool {
		_, err := c.w.Write(buf.Bytes())
		buf.Reset()
		if err != nil {
			return false
		}
		if flusher != nil {
			flusher.Flush()
		}
		return true
	}
	if err != nil {
		// History is gone, or the version is not reached yet: one ERROR
		// event, as the watch cache sends it, then the end of the stream.
		st := request.Status(c.storeError(err, ""))
		st.Kind, st.APIVersion = "Status", "v1"
		writeEvent(&buf, "ERROR", mustJSON(st))
		send()
		return
	}

	// Initial state (synthetic ADDED) or replayed history, converted in
	// batches.
	if len(initial) > 0 {
		const batch = 500
		for i := 0; i < len(initial); i += batch {
			j := min(i+batch, len(initial))
			out, err := c.convertItems(initial[i:j])
			if err != nil {
				c.sendError(&buf, err)
				send()
				return
			}
			for _, o := range out {
				if err := event(string(store.Added), o); err != nil {
					c.sendError(&buf, err)
					send()
					return
				}
			}
			if !send() {
				return
			}
		}
	}
	if initialEnd {
		if err := event(string(store.Bookmark), c.bookmarkObject(startRev, true)); err != nil {
			c.sendError(&buf, err)
		}
		if !send() {
			return
		}
	}
	// emit writes events in order, their objects converted in one batch.
	emit := func(evs []store.Event) bool {
		var items []*store.Item
		for _, ev := range evs {
			if ev.Type != store.Bookmark {
				items = append(items, ev.Item)
			}
		}
		out, err := c.convertItems(items)
		if err != nil {
			c.sendError(&buf, err)
			send()
			return false
		}
		for _, ev := range evs {
			if ev.Type == store.Bookmark {
				if opts.AllowWatchBookmarks {
					if err := event(string(store.Bookmark), c.bookmarkObject(ev.Rev, false)); err != nil {
						c.sendError(&buf, err)
					}
				}
				continue
			}
			if err := event(string(ev.Type), out[0]); err != nil {
				c.sendError(&buf, err)
				send()
				return false
			}
			out = out[1:]
		}
		return send()
	}
	for i := 0; i < len(replay); i += watchBatch {
		if !emit(replay[i:min(i+watchBatch, len(replay))]) {
			return
		}
	}
	// next takes the events waiting for this watcher, up to a batch.
	next := func(first store.Event) []store.Event {
		evs := []store.Event{first}
		for len(evs) < watchBatch {
			select {
			case ev := <-w.Events():
				evs = append(evs, ev)
			default:
				return evs
			}
		}
		return evs
	}

	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		select {
		case ev := <-w.Events():
			if !emit(next(ev)) {
				return
			}
		case <-w.Done():
			// Send what was delivered before the cache ended the watch.
			for {
				select {
				case ev := <-w.Events():
					if !emit(next(ev)) {
						return
					}
				default:
					return
				}
			}
		case <-timer.C:
			return
		case <-c.ctx.Done():
			return
		case <-c.h.Stopping:
			return
		}
	}
}

// watchBatch is the most events converted and written at once.
const watchBatch = 500

func (c *call) sendError(buf *bytes.Buffer, err error) {
	st := request.Status(err)
	st.Kind, st.APIVersion = "Status", "v1"
	writeEvent(buf, "ERROR", mustJSON(st))
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
