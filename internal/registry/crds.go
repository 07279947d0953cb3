package registry

import (
	"context"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/crdserver/crdserver/internal/apis/apiextensions"
	"github.com/crdserver/crdserver/internal/apis/conversionrules"
	"github.com/crdserver/crdserver/internal/conversion"
	"github.com/crdserver/crdserver/internal/customresource"
	"github.com/crdserver/crdserver/internal/store"
)

// Start waits for the built-in caches, then follows the stored CRDs until
// Stop: each CRD whose names are accepted is served.
func (r *Registry) Start(ctx context.Context) error {
	if err := r.WaitReady(ctx); err != nil {
		return err
	}
	if r.opts.ConversionRules != nil {
		if err := r.opts.ConversionRules.Cache.WaitReady(ctx); err != nil {
			return err
		}
		// The rules are known before the CRDs are first applied: a CRD is
		// never served with the wrong conversion.
		r.loadRules()
	}
	r.done = make(chan struct{})
	go func() {
		defer close(r.done)
		if r.opts.ConversionRules != nil {
			go r.followRules(r.ctx)
		}
		r.followCRDs(r.ctx)
	}()
	return nil
}

// loadRules reads every stored ConversionRules.
func (r *Registry) loadRules() {
	l := r.opts.ConversionRules.Cache.List(store.ListOptions{})
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, it := range l.Items {
		if e := decodeRules(it); e != nil {
			r.rules[it.Name] = e
		}
	}
}

func decodeRules(it *store.Item) *ruleEntry {
	cr, err := conversionrules.Decode(it.Bytes())
	if err != nil {
		return nil
	}
	return &ruleEntry{spec: cr.Spec, rev: it.Rev}
}

// followRules applies changes of ConversionRules to their CRDs.
func (r *Registry) followRules(ctx context.Context) {
	store.Follow(ctx, r.opts.ConversionRules.Cache, func(items []*store.Item, _ int64) {
		r.mu.Lock()
		seen := map[string]bool{}
		for _, it := range items {
			seen[it.Name] = true
			if e := decodeRules(it); e != nil {
				r.rules[it.Name] = e
			}
		}
		for name := range r.rules {
			if !seen[name] {
				delete(r.rules, name)
			}
		}
		r.mu.Unlock()
		r.reapplyAll()
	}, func(ev store.Event) {
		r.mu.Lock()
		if ev.Type == store.Deleted {
			delete(r.rules, ev.Item.Name)
		} else if e := decodeRules(ev.Item); e != nil {
			r.rules[ev.Item.Name] = e
		}
		r.mu.Unlock()
		r.reapply(ev.Item.Name)
	})
}

// reapply rebuilds one CRD's resource (its conversion rules changed).
func (r *Registry) reapply(name string) {
	r.rebuild(name)
	r.publishIfDirty()
}

// rebuild rebuilds one CRD's resource from the stored CRD.
func (r *Registry) rebuild(name string) {
	r.mu.Lock()
	e := r.defs[name]
	r.mu.Unlock()
	if e == nil || e.crd == nil {
		return
	}
	if it, _ := r.opts.CRDs.Cache.Get(r.opts.CRDs.Key("", name)); it != nil {
		r.applyCRD(it)
	}
}

func (r *Registry) reapplyAll() {
	r.mu.Lock()
	names := make([]string, 0, len(r.defs))
	for n := range r.defs {
		names = append(names, n)
	}
	r.mu.Unlock()
	for _, n := range names {
		r.rebuild(n)
	}
	r.publishIfDirty()
}

// followCRDs keeps the registry in step with the stored CRDs, as
// store.Follow does, but publishes one Index for the events that come
// together: those already waiting, and, when the last Index was published
// less than publishEvery ago, those that come until then (up to maxBatch).
// Installing a thousand CRDs publishes far fewer than a thousand Indexes,
// each of which every subscriber reads; a lone change is published at
// once, and so is a batch a request waits for (WaitApplied): a client
// that saw its CRD Established creates its first object without waiting
// out the batch.
func (r *Registry) followCRDs(ctx context.Context) {
	c := r.opts.CRDs.Cache
	var last time.Time
	for ctx.Err() == nil {
		w, err := c.Watch(ctx, store.WatchOptions{FromState: true})
		if err != nil {
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		r.syncCRDs(w.Initial, w.Rev)
		last = time.Now()
		var evs []store.Event
	events:
		for {
			select {
			case <-ctx.Done():
				w.Stop()
				return
			case <-w.Done():
				break events
			case <-w.Ready():
				evs = w.Next(evs[:0], maxBatch)
				if len(evs) == 0 {
					continue
				}
				rev := r.applyEvents(evs)
				for n := len(evs); n < maxBatch; n += len(evs) {
					evs = more(ctx, w, r.hurry, evs[:0], maxBatch-n, last.Add(publishEvery))
					if len(evs) == 0 {
						break
					}
					rev = r.applyEvents(evs)
				}
				clear(evs)
				r.publishIfDirty()
				last = time.Now()
				r.markApplied(rev)
			}
		}
	}
}

// applyEvents applies evs in order and returns the revision of the last.
func (r *Registry) applyEvents(evs []store.Event) int64 {
	var rev int64
	for _, ev := range evs {
		rev = r.applyEvent(ev)
	}
	return rev
}

// maxBatch bounds the CRD events one Index is published for, and
// publishEvery is the least time between two Indexes while events keep
// coming.
const (
	maxBatch     = 256
	publishEvery = 10 * time.Millisecond
)

// events is what more reads of a store.Watcher.
type events interface {
	Next(buf []store.Event, most int) []store.Event
	Ready() <-chan struct{}
	Done() <-chan struct{}
}

// more appends to buf up to most events the watcher has received, or
// receives before until; none when there are none by then, or when hurry
// says a request waits.
func more(ctx context.Context, w events, hurry <-chan struct{}, buf []store.Event, most int, until time.Time) []store.Event {
	if buf = w.Next(buf, most); len(buf) > 0 {
		return buf
	}
	wait := time.Until(until)
	if wait <= 0 {
		return buf
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		select {
		case <-w.Ready():
			if buf = w.Next(buf, most); len(buf) > 0 {
				return buf
			}
		case <-t.C:
			return buf
		case <-hurry:
			return buf
		case <-w.Done():
			return buf
		case <-ctx.Done():
			return buf
		}
	}
}

// syncCRDs applies the whole state of the CRDs at revision rev.
func (r *Registry) syncCRDs(items []*store.Item, rev int64) {
	seen := sets.New[string]()
	for _, it := range items {
		seen.Insert(it.Name)
		r.applyCRD(it)
	}
	r.mu.Lock()
	var gone []string
	for name := range r.defs {
		if !seen.Has(name) {
			gone = append(gone, name)
		}
	}
	r.mu.Unlock()
	for _, name := range gone {
		r.removeCRD(name)
	}
	r.publishIfDirty()
	r.markApplied(rev)
	r.synced.Store(true)
}

// applyEvent applies one CRD change and returns its revision.
func (r *Registry) applyEvent(ev store.Event) int64 {
	switch ev.Type {
	case store.Added, store.Modified:
		r.applyCRD(ev.Item)
	case store.Deleted:
		r.removeCRD(ev.Item.Name)
	}
	return ev.Rev
}

// applyCRD (re)builds the resource of a stored CRD; the caller publishes.
// The resource keeps its watch cache, and its schemas and converter while
// the CRD's generation and spec.conversion stay the same. The CRD is
// decoded without its schemas: they are compiled from the stored bytes,
// part by part, when a request first needs them, and held in the budget
// pool (Options.Budget).
func (r *Registry) applyCRD(it *store.Item) {
	crd, withSchema, err := apiextensions.DecodeSlim(it.Bytes())
	if err != nil {
		r.log.Error("undecodable CRD", "name", it.Name, "err", err)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.defs[crd.Name]
	if e == nil {
		e = &crdEntry{}
		r.defs[crd.Name] = e
	}
	e.crd, e.item, e.established = crd, it, apiextensions.IsEstablished(crd)
	old := e.res
	e.res = nil
	if apiextensions.Servable(crd) && !r.builtinOverlap(crd.Spec.Group, crd.Status.AcceptedNames.Plural) {
		prefix := customresource.KeyPrefix(crd)
		cache := r.caches[prefix]
		if cache == nil {
			cache = r.opts.NewCache(prefix)
			r.caches[prefix] = cache
		}
		if e.schemas == nil || e.schemaGen != crd.Generation || e.schemaUID != crd.UID {
			for _, v := range e.schemas {
				v.Drop()
			}
			e.schemas = customresource.LazySchemas(r.opts.Budget, crd, it.Bytes, withSchema)
			e.schemaGen, e.schemaUID, e.schemaRev, e.schemaItem = crd.Generation, crd.UID, it.Rev, it
			e.conv = nil
		}
		rules := r.rules[crd.Name]
		if e.conv == nil || !apiequality.Semantic.DeepEqual(e.convSpec, crd.Spec.Conversion) || e.convRules != rules {
			var conv conversion.Converter
			var err error
			if rules != nil {
				var full *apiextensionsv1.CustomResourceDefinition
				if full, err = apiextensions.Decode(it.Bytes()); err == nil {
					conv, err = conversion.ForRules(full, rules.spec, e.schemas, e.schemaRev)
				}
			} else {
				var inner conversion.Converter
				inner, err = r.strategy(e, crd)
				conv = conversion.WithStrategy(crd, inner, e.schemas, e.schemaRev)
			}
			if err != nil {
				// Served without conversion between versions: reads in
				// another version fail with the reason.
				r.log.Warn("CRD conversion", "crd", crd.Name, "err", err)
			}
			e.conv = conv
			e.convSpec = crd.Spec.Conversion.DeepCopy()
			e.convRules = rules
		}
		schemaItem := e.schemaItem
		e.res = customresource.New(crd, customresource.Built{
			Cache:     cache,
			Converter: e.conv,
			Schemas:   e.schemas,
			Full: func() (*apiextensionsv1.CustomResourceDefinition, error) {
				return apiextensions.Decode(schemaItem.Bytes())
			},
			Pool: r.opts.Budget,
		})
		if old != nil && old.FieldManagers != nil && old.Converter == e.conv && e.resSchemaRev == e.schemaRev &&
			old.FieldManagers.Kind == e.res.FieldManagers.Kind {
			// The same schemas, converter and kind: the type converter
			// built for them serves on.
			e.res.FieldManagers = old.FieldManagers
		}
		e.resSchemaRev = e.schemaRev
	}
	if old != nil && old.FieldManagers != nil && (e.res == nil || e.res.FieldManagers != old.FieldManagers) {
		old.FieldManagers.Release()
	}
	if old != nil && old.Converter != nil && (e.res == nil || old.Converter != e.res.Converter) {
		// Requests in flight may still use it: this closes idle
		// connections only.
		conversion.Close(old.Converter)
	}
	r.dirty = true
	r.changed[crd.Name] = true
}

// strategy returns the converter of crd's conversion strategy: the one
// made before for the same spec.conversion, group and kind if e has it,
// else a new one (Failing, and the error, when it cannot be made).
func (r *Registry) strategy(e *crdEntry, crd *apiextensionsv1.CustomResourceDefinition) (conversion.Converter, error) {
	for i, s := range e.strategies {
		if s.group == crd.Spec.Group && s.kind == crd.Spec.Names.Kind && apiequality.Semantic.DeepEqual(s.spec, crd.Spec.Conversion) {
			e.strategies = append(append([]strategyEntry{s}, e.strategies[:i]...), e.strategies[i+1:]...)
			return s.conv, nil
		}
	}
	conv, err := conversion.Strategy(crd, r.opts.Conversion)
	if err != nil {
		return conversion.Failing{Err: err}, err
	}
	e.strategies = append([]strategyEntry{{spec: crd.Spec.Conversion.DeepCopy(), group: crd.Spec.Group, kind: crd.Spec.Names.Kind, conv: conv}}, e.strategies...)
	if len(e.strategies) > maxStrategies {
		for _, s := range e.strategies[maxStrategies:] {
			conversion.Close(s.conv)
		}
		e.strategies = e.strategies[:maxStrategies]
	}
	return conv, nil
}

// builtinOverlap: a CRD may not take over a built-in resource.
func (r *Registry) builtinOverlap(group, plural string) bool {
	for _, b := range r.opts.Builtins {
		if b.Group == group && b.Plural == plural {
			return true
		}
	}
	return false
}

func (r *Registry) removeCRD(name string) {
	r.mu.Lock()
	e := r.defs[name]
	delete(r.defs, name)
	var stop *store.Cache
	if e != nil {
		prefix := customresource.KeyPrefix(e.crd)
		if c := r.caches[prefix]; c != nil {
			stop = c
			delete(r.caches, prefix)
		}
		if e.res != nil {
			conversion.Close(e.res.Converter)
			if e.res.FieldManagers != nil {
				e.res.FieldManagers.Release()
			}
		}
		for _, s := range e.strategies {
			conversion.Close(s.conv)
		}
		for _, v := range e.schemas {
			v.Drop()
		}
	}
	r.dirty = true
	r.changed[name] = true
	r.mu.Unlock()
	if stop != nil {
		go stop.Stop()
	}
}
