package resource

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metainternalversionscheme "k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme"
	metainternalversionvalidation "k8s.io/apimachinery/pkg/apis/meta/internalversion/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/storage"

	"github.com/crdserver/crdserver/internal/conversion"
	"github.com/crdserver/crdserver/internal/jsonraw"
	"github.com/crdserver/crdserver/internal/request"
	"github.com/crdserver/crdserver/internal/store"
)

// listOptions parses and validates the query of a list, watch or
// deletecollection, with Kubernetes' own codec and rules.
func (c *call) listOptions() (*metainternalversion.ListOptions, error) {
	opts := &metainternalversion.ListOptions{}
	if err := metainternalversionscheme.ParameterCodec.DecodeParameters(c.r.URL.Query(), metav1.SchemeGroupVersion, opts); err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	if c.info.Verb == "watch" {
		opts.Watch = true
	}
	if errs := metainternalversionvalidation.ValidateListOptions(opts, true); len(errs) > 0 {
		return nil, apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "ListOptions"}, "", errs)
	}
	if _, err := ParseResourceVersion(opts.ResourceVersion); err != nil {
		return nil, invalidResourceVersion(opts.ResourceVersion, err)
	}
	if opts.FieldSelector != nil {
		for _, req := range opts.FieldSelector.Requirements() {
			_, labelled := c.ver.FieldLabels[req.Field]
			if req.Field != "metadata.name" && req.Field != "metadata.namespace" && !labelled && !slices.Contains(c.ver.SelectableFields, req.Field) {
				return nil, apierrors.NewBadRequest(fmt.Sprintf("field label not supported: %s", req.Field))
			}
		}
	}
	return opts, nil
}

// selection is what a list, watch or deletecollection selects by labels
// and fields. Kubernetes matches selectors on the object in the version
// the client asked for (a conversion webhook may rename a selectable field
// or change labels; defaults the stored version applies on read count): a
// cached item is matched as cached when it is served as it is
// (conversion.ServedAsStored), otherwise on what its conversion serves.
type selection struct {
	ls     labels.Selector
	fs     fields.Selector
	labels map[string]FieldLabel
	// content: the selection reads more than an object's name and
	// namespace (which no conversion changes).
	content bool
}

// newSelection returns the selection of the options, nil when they select
// nothing.
func newSelection(opts *metainternalversion.ListOptions, fieldLabels map[string]FieldLabel) *selection {
	ls, fs := opts.LabelSelector, opts.FieldSelector
	if ls != nil && ls.Empty() {
		ls = nil
	}
	if fs != nil && fs.Empty() {
		fs = nil
	}
	if ls == nil && fs == nil {
		return nil
	}
	sel := &selection{ls: ls, fs: fs, labels: fieldLabels, content: ls != nil}
	if fs != nil {
		for _, r := range fs.Requirements() {
			if r.Field != "metadata.name" && r.Field != "metadata.namespace" {
				sel.content = true
			}
		}
	}
	return sel
}

// matchItem matches a cached item as it is cached.
func (s *selection) matchItem(it *store.Item) bool {
	if s.ls != nil && !s.ls.Matches(labels.Set(it.Labels)) {
		return false
	}
	if s.fs != nil && !s.fs.Matches(itemFieldSet{it: it, raw: it.Bytes(), labels: s.labels}) {
		return false
	}
	return true
}

// matchServed matches a cached item on served, the object a client gets
// of it.
func (s *selection) matchServed(it *store.Item, served []byte) bool {
	if sameBytes(served, it.Raw) { // a packed item is never the same bytes
		return s.matchItem(it)
	}
	if s.ls != nil && !s.ls.Matches(labels.Set(servedLabels(served))) {
		return false
	}
	if s.fs != nil && !s.fs.Matches(itemFieldSet{it: it, raw: served, labels: s.labels}) {
		return false
	}
	return true
}

// sameBytes reports whether a and b are the same bytes in memory (what
// conversion.Items returns for an object it serves as cached).
func sameBytes(a, b []byte) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// servedLabels reads metadata.labels of an encoded object.
func servedLabels(raw []byte) map[string]string {
	md, ok, err := jsonraw.Field(raw, "metadata")
	if err != nil || !ok {
		return nil
	}
	l, ok, err := jsonraw.Field(md, "labels")
	if err != nil || !ok {
		return nil
	}
	var out map[string]string
	_ = json.Unmarshal(l, &out)
	return out
}

// filter is the item filter of a cache read or an etcd read for sel: exact
// for items served as they are stored, and passing the others on (maybe)
// to be matched once converted, when post says so.
func (c *call) filter(sel *selection) (keep func(*store.Item) bool, post bool) {
	if sel == nil {
		return nil, false
	}
	conv, to := c.res.Converter, c.apiVersion()
	if !sel.content || !conversion.ServedMayDiffer(conv) {
		return sel.matchItem, false
	}
	return func(it *store.Item) bool {
		if conversion.ServedAsStored(conv, it, to) {
			return sel.matchItem(it)
		}
		return true
	}, true
}

type itemFieldSet struct {
	it     *store.Item
	raw    []byte // the object as served
	labels map[string]FieldLabel
}

func (f itemFieldSet) Has(field string) bool { _, ok := f.lookup(field); return ok }
func (f itemFieldSet) Get(field string) string {
	v, _ := f.lookup(field)
	return v
}
func (f itemFieldSet) lookup(field string) (string, bool) {
	switch field {
	case "metadata.name":
		return f.it.Name, true
	case "metadata.namespace":
		return f.it.Namespace, true
	}
	if read, ok := f.labels[field]; ok {
		return read(f.raw), true
	}
	// A selectable field of the object: read it from its JSON.
	return jsonraw.Scalar(f.raw, strings.Split(field, "."))
}

var _ fields.Fields = itemFieldSet{}

// decodeContinue reads a continue token as Kubernetes reads it (its
// storage.DecodeContinue: the same checks and messages), and refuses a
// negative revision too.
func decodeContinue(token, prefix string) (string, int64, error) {
	key, rev, err := storage.DecodeContinue(token, prefix)
	if err == nil && rev < 0 {
		err = storage.ErrInvalidStartRV
	}
	if err != nil {
		return "", 0, fmt.Errorf("%w: %v", errBadContinue, err)
	}
	return key, rev, nil
}

var errBadContinue = errors.New("invalid continue token")

// page is a list result before encoding.
type page struct {
	items  [][]byte      // as stored, unless they come from the cache
	cached []*store.Item // the items, when they come from the cache
	// served holds the items in the request's version, when selecting
	// them took their conversion.
	served    [][]byte
	rev       int64
	next      string // key to continue from
	remaining int64  // -1: unknown
}

// collect reads the list the options ask for. The decision follows the
// resourceVersion table of Kubernetes' API concepts: continue tokens and
// exact reads go to etcd at the requested revision, everything else is
// served from the watch cache once it is fresh enough.
func (c *call) collect(opts *metainternalversion.ListOptions) (*page, error) {
	res := c.res
	lo := res.KeyPrefix
	if c.namespace != "" {
		lo = res.KeyPrefix + c.namespace + "/"
	}
	hi := store.PrefixEnd(lo)
	sel := newSelection(opts, c.ver.FieldLabels)
	keep, post := c.filter(sel)
	rv, _ := ParseResourceVersion(opts.ResourceVersion)
	// Clients list it: what it takes in stays as it is (store/cold.go).
	res.Cache.Reading()

	switch {
	case opts.Continue != "":
		if opts.ResourceVersion != "" && opts.ResourceVersion != "0" {
			return nil, apierrors.NewBadRequest("specifying resource version is not allowed when using continue")
		}
		start, crev, err := decodeContinue(opts.Continue, res.KeyPrefix)
		if err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		if start < lo || start >= hi {
			return nil, apierrors.NewBadRequest("invalid continue token: continue key is not valid: key is outside the listed range")
		}
		if !post {
			// Unchanged since the first page: the cache has that state.
			if l, ok := res.Cache.ListAt(store.ListOptions{Namespace: c.namespace, Start: start, Limit: int(opts.Limit), Filter: keep}, crev); ok {
				return cachedPage(l, sel), nil
			}
		}
		p, err := c.collectFromStore(start, hi, crev, opts.Limit, sel)
		if errors.Is(err, store.ErrCompacted) {
			return nil, expiredContinue()
		}
		return p, err
	case rv > 0 && (opts.ResourceVersionMatch == metav1.ResourceVersionMatchExact ||
		(opts.ResourceVersionMatch == "" && opts.Limit > 0)):
		p, err := c.collectFromStore(lo, hi, rv, opts.Limit, sel)
		if errors.Is(err, store.ErrCompacted) {
			return nil, apierrors.NewResourceExpired("The resourceVersion for the provided list is too old.")
		}
		return p, err
	}

	cache := res.Cache
	limit := opts.Limit
	switch {
	case opts.ResourceVersion == "":
		cur, err := c.h.Store.CurrentRevision(c.ctx)
		if err != nil {
			return nil, err
		}
		if !cache.Ready() {
			// The cache is loading (a restart with many objects stored):
			// etcd answers a page meanwhile; a whole list waits for the
			// cache, which decodes the objects once for every reader.
			if opts.Limit > 0 {
				return c.collectFromStore(lo, hi, 0, opts.Limit, sel)
			}
			if err := cache.WaitReady(c.ctx); err != nil {
				return nil, err
			}
		}
		if err := cache.WaitFresh(c.ctx, cur); err != nil {
			// The cache lags: read etcd directly.
			return c.collectFromStore(lo, hi, 0, opts.Limit, sel)
		}
	case rv == 0:
		if err := cache.WaitReady(c.ctx); err != nil {
			return nil, err
		}
		// kube-apiserver's watch cache ignores the limit of a list at
		// resourceVersion=0: every item, no continue token.
		limit = 0
	default:
		if err := cache.WaitFresh(c.ctx, rv); err != nil {
			return nil, err
		}
	}
	if post {
		// Some items are matched once converted: the whole range is
		// taken at once (one state), converted until the page is full.
		l := cache.List(store.ListOptions{Namespace: c.namespace, Filter: keep})
		return c.selectConverted(l.Items, l.Rev, limit, sel)
	}
	return cachedPage(cache.List(store.ListOptions{Namespace: c.namespace, Limit: int(limit), Filter: keep}), sel), nil
}

// cachedPage is a page of cached items.
func cachedPage(l store.CachedList, sel *selection) *page {
	p := &page{rev: l.Rev, next: l.Next, remaining: l.Remaining, cached: l.Items}
	if p.cached == nil {
		p.cached = []*store.Item{}
	}
	if sel != nil {
		p.remaining = -1
	}
	return p
}

// storedAs reports whether conv, None, serves every item as it is cached
// in version to: each is stored in it (what the cache's index of the item
// says, without reading the item).
func storedAs(conv conversion.Converter, items []*store.Item, to string) bool {
	if _, none := conv.(conversion.None); !none {
		return false
	}
	for _, it := range items {
		if v := keptVersions(it); v == nil || v.APIVersion != to {
			return false
		}
	}
	return true
}

// stored returns the page's objects as stored.
func (p *page) stored() [][]byte {
	if p.cached == nil {
		return p.items
	}
	out := make([][]byte, len(p.cached))
	for i, it := range p.cached {
		out[i] = it.Bytes()
	}
	return out
}

// selectBatch is how many objects are converted at once to be matched.
const selectBatch = 500

// selectConverted keeps the cached items that sel matches once converted
// to the request's version, up to limit (0: all).
func (c *call) selectConverted(items []*store.Item, rev, limit int64, sel *selection) (*page, error) {
	p := &page{rev: rev, remaining: -1}
	for start := 0; start < len(items); start += selectBatch {
		batch := items[start:min(start+selectBatch, len(items))]
		served, err := c.convertItems(batch)
		if err != nil {
			return nil, err
		}
		for j, it := range batch {
			if !sel.matchServed(it, served[j]) {
				continue
			}
			if limit > 0 && int64(len(p.items)) >= limit {
				p.next = it.Key
				return p, nil
			}
			p.items = append(p.items, it.Bytes())
			p.cached = append(p.cached, it)
			p.served = append(p.served, served[j])
		}
	}
	return p, nil
}

func expiredContinue() error {
	return apierrors.NewResourceExpired("The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.")
}

// collectFromStore reads a page from etcd at rev (0: newest), reading on
// until limit items match the selection or the range ends.
func (c *call) collectFromStore(start, end string, rev, limit int64, sel *selection) (*page, error) {
	keep, post := c.filter(sel)
	p := &page{remaining: -1}
	batch := limit
	if keep != nil && batch > 0 && batch < 500 {
		batch = 500
	}
	if batch <= 0 || batch > storeBatch {
		// A whole list is read in pieces: etcd's answer to a range of a
		// million objects would be a gigabyte and more at once.
		batch = storeBatch
	}
	for {
		l, err := c.h.Store.List(c.ctx, start, end, rev, batch)
		if err != nil {
			return nil, err
		}
		rev = l.Revision
		p.rev = rev
		items := make([]*store.Item, 0, len(l.KVs))
		for _, kv := range l.KVs {
			it, err := DecodeItem(kv.Key, kv.Value, kv.ModRevision)
			if err != nil {
				return nil, apierrors.NewInternalError(fmt.Errorf("stored object %s: %w", kv.Key, err))
			}
			items = append(items, it)
		}
		var served [][]byte
		if post {
			// Matched on the objects as the client gets them.
			raws := make([][]byte, len(items))
			for i, it := range items {
				raws[i] = it.Bytes()
			}
			if served, err = c.convert(raws); err != nil {
				return nil, err
			}
		}
		for i, it := range items {
			switch {
			case post:
				if !sel.matchServed(it, served[i]) {
					continue
				}
				p.served = append(p.served, served[i])
			case keep != nil && !keep(it):
				continue
			}
			p.items = append(p.items, it.Bytes())
			if limit > 0 && int64(len(p.items)) >= limit {
				if i < len(l.KVs)-1 || l.More {
					p.next = l.KVs[i].Key + "\x00"
					if keep == nil {
						p.remaining = l.Remaining + int64(len(l.KVs)-1-i)
					}
				}
				return p, nil
			}
		}
		if !l.More || len(l.KVs) == 0 {
			return p, nil
		}
		start = l.KVs[len(l.KVs)-1].Key + "\x00"
	}
}

// storeBatch is the most objects a list reads from etcd at once (a
// variable for tests).
var storeBatch int64 = 5000

// list answers GET of a collection.
func (c *call) list() {
	opts, err := c.listOptions()
	if err != nil {
		c.fail(err)
		return
	}
	t, err := request.Negotiate(c.r, c.offer(readOffer))
	if err != nil {
		c.fail(err)
		return
	}
	p, err := c.collect(opts)
	if err != nil {
		c.fail(c.storeError(err, ""))
		return
	}
	var items [][]byte
	lazy := false
	switch {
	case p.served != nil || (p.items == nil && p.cached == nil):
		items = p.served
	case p.cached != nil && t.As == request.AsObject && t.Format == request.FormatJSON && !t.Pretty:
		// Written as read: objects kept compressed are uncompressed as
		// they are written (writeList).
		if storedAs(c.res.Converter, p.cached, c.apiVersion()) {
			items = make([][]byte, len(p.cached))
			for i, it := range p.cached {
				items[i] = it.Raw // nil if packed
			}
		} else if items, err = conversion.ItemsLazy(c.ctx, c.res.Converter, p.cached, c.apiVersion()); err != nil {
			err = asStatus(err)
		}
		lazy = true
	case p.cached != nil:
		items, err = c.convertItems(p.cached)
	default:
		items, err = c.convert(p.items)
	}
	if err != nil {
		c.fail(err)
		return
	}
	cont := ""
	if p.next != "" {
		// Kubernetes' token: the revision of the first page and the key
		// to continue from, relative to the resource's key prefix.
		if cont, err = storage.EncodeContinue(p.next, c.res.KeyPrefix, p.rev); err != nil {
			c.fail(apierrors.NewInternalError(err))
			return
		}
	}
	if t.As != request.AsObject {
		c.transform(t, items, pageAt(p.rev, cont, p.remaining))
		return
	}
	if !lazy {
		p.cached = nil
	}
	c.writeList(t, items, p.cached, pageAt(p.rev, cont, p.remaining))
}

// encodeList writes a list object around already encoded items, read as
// read says.
func (c *call) encodeList(items [][]byte, read readOf) []byte {
	head, tail := c.listEnvelope(read)
	size := len(head) + len(tail)
	for _, it := range items {
		size += len(it) + 1
	}
	b := make([]byte, 0, size)
	b = append(b, head...)
	for i, it := range items {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, it...)
	}
	return append(b, tail...)
}

// listEnvelope is what a list object holds before its items and after.
func (c *call) listEnvelope(read readOf) (head, tail []byte) {
	rev, cont, remaining := read.rev, read.cont, read.remaining
	var b bytes.Buffer
	b.WriteString(`{"apiVersion":`)
	writeJSONString(&b, c.apiVersion())
	b.WriteString(`,"items":[`)
	head = bytes.Clone(b.Bytes())
	b.Reset()
	b.WriteString(`],"kind":`)
	writeJSONString(&b, c.res.ListKind)
	b.WriteString(`,"metadata":{"continue":`)
	writeJSONString(&b, cont)
	if cont != "" && remaining > 0 {
		b.WriteString(`,"remainingItemCount":`)
		b.WriteString(itoa(remaining))
	}
	b.WriteString(`,"resourceVersion":"`)
	b.WriteString(itoa(rev))
	b.WriteString(`"}}`)
	return head, b.Bytes()
}

// streamAbove is the size from which a JSON list is written as it is
// encoded, in pieces, rather than made whole first: a list of a million
// objects would otherwise be a second copy of them, per request.
const streamAbove = 1 << 20

// writeList answers with a list object around already encoded items, or,
// where an item is nil, cached's item as it is kept (cached is nil or as
// long as items): as JSON, it writes the items as they are, in pieces of
// streamPiece bytes, with the Content-Length known before (so the
// compression filter decides as for any answer); in any other
// representation, made whole first.
func (c *call) writeList(t request.Target, items [][]byte, cached []*store.Item, read readOf) {
	size := 0
	for i, it := range items {
		if it == nil && cached != nil {
			size += cached[i].Size() + 1
		} else {
			size += len(it) + 1
		}
	}
	if t.Format != request.FormatJSON || t.Pretty || size < streamAbove {
		for i, it := range items {
			if it == nil && cached != nil {
				items[i] = cached[i].Bytes()
			}
		}
		request.Write(c.w, c.r, http.StatusOK, t, c.encodeList(items, read))
		return
	}
	head, tail := c.listEnvelope(read)
	size += len(head) + len(tail)
	if len(items) > 0 {
		size--
	}
	h := c.w.Header()
	h.Set("Content-Type", t.ContentType())
	if h.Get("Cache-Control") == "" {
		h.Set("Cache-Control", "no-cache, private")
	}
	h.Set("Content-Length", strconv.Itoa(size))
	c.w.WriteHeader(http.StatusOK)
	if c.r.Method == http.MethodHead {
		return
	}
	buf := make([]byte, 0, streamPiece)
	buf = append(buf, head...)
	for i, it := range items {
		if i > 0 {
			buf = append(buf, ',')
		}
		if it == nil && cached != nil {
			buf = cached[i].AppendBytes(buf)
		} else {
			buf = append(buf, it...)
		}
		if len(buf) >= streamPiece-streamPiece/8 {
			if _, err := c.w.Write(buf); err != nil {
				return // the client went away
			}
			buf = buf[:0]
		}
	}
	buf = append(buf, tail...)
	_, _ = c.w.Write(buf)
}

// streamPiece is the size of the pieces a streamed list is written in.
const streamPiece = 64 << 10

func writeJSONString(b *bytes.Buffer, s string) {
	q, _ := json.Marshal(s)
	b.Write(q)
}
