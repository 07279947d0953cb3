package conversion

import (
	"bytes"
	"context"
	"crypto/sha256"
	"runtime"
	"sync"

	"github.com/crdserver/crdserver/internal/store"
)

// maxRemembered is how many conversions by a CRD's converter a cached
// object remembers, and maxRememberedIn how many answers of a strategy's
// converter: each CRD edit makes a new CRD converter, whose entries push
// the older ones out, while the strategy's answers outlive the edits.
const (
	maxRemembered   = 4
	maxRememberedIn = 2
)

// remembered is a cached object converted by one converter to one version;
// an item's memo holds a short list of them, newest first, so that readers
// of different versions do not undo each other's work. A CRD's converter
// (WithSchemas) remembers its whole work under itself, and what its
// strategy's converter (a webhook) answered under that one, with the hash
// of what it was sent (in): a new WithSchemas (the CRD's schemas changed)
// sends the webhook what it sent before for an object that did not
// change, and takes the answer from the memo instead.
type remembered struct {
	conv Converter
	to   string
	in   [sha256.Size]byte
	// raw is the converted object; nil when the conversion left the stored
	// encoding as it was.
	raw  []byte
	next *remembered
}

func lookup(it *store.Item, conv Converter, to string) (*remembered, bool) {
	return lookupIn(it, conv, to, [sha256.Size]byte{})
}

func lookupIn(it *store.Item, conv Converter, to string, in [sha256.Size]byte) (*remembered, bool) {
	m := it.Memo()
	if m == nil {
		return nil, false
	}
	head, _ := m.Load().(*remembered)
	for r := head; r != nil; r = r.next {
		if r.conv == conv && r.to == to && r.in == in {
			return r, true
		}
	}
	return nil, false
}

func remember(it *store.Item, conv Converter, to string, raw []byte) {
	rememberIn(it, conv, to, [sha256.Size]byte{}, raw)
}

func rememberIn(it *store.Item, conv Converter, to string, in [sha256.Size]byte, raw []byte) {
	m := it.Memo()
	if m == nil {
		return
	}
	var zero [sha256.Size]byte
	m.Update(func(old any) any {
		head := &remembered{conv: conv, to: to, in: in, raw: raw}
		tail, outer, inner := head, 0, 0
		if in == zero {
			outer++
		} else {
			inner++
		}
		for o, _ := old.(*remembered); o != nil; o = o.next {
			if o.conv == conv && o.to == to {
				continue
			}
			if o.in == zero {
				if outer == maxRemembered {
					continue
				}
				outer++
			} else {
				if inner == maxRememberedIn {
					continue
				}
				inner++
			}
			tail.next = &remembered{conv: o.conv, to: o.to, in: o.in, raw: o.raw}
			tail = tail.next
		}
		return head
	})
}

// Items converts cached objects to the apiVersion to, in one batch,
// sharing the work between readers: each item remembers its conversion by
// conv in its memo, so the next reader of that version converts nothing.
// The None converter is cheap and not remembered. A CRD's converter
// (WithSchemas) knows from each item's store.WriteStamp what it needs
// before it is converted; an item in the version asked for that needs
// nothing is served as cached, without a memo.
func Items(ctx context.Context, conv Converter, items []*store.Item, to string) ([][]byte, error) {
	out := make([][]byte, len(items))
	for i, it := range items {
		out[i] = it.Bytes()
	}
	if _, trivial := conv.(None); trivial {
		res, err := conv.Convert(ctx, out, to)
		return res.Objects, err
	}
	ws, _ := conv.(*WithSchemas)
	var pending []int
	var needs []need
	for i, it := range items {
		var n need
		if ws != nil {
			n = ws.itemNeed(it)
			if n != needAll && ws.itemServedAsStored(it, n, to) {
				continue
			}
		}
		if r, ok := lookup(it, conv, to); ok {
			if r.raw != nil {
				out[i] = r.raw
			}
			continue
		}
		pending = append(pending, i)
		needs = append(needs, n)
	}
	if len(pending) == 0 {
		return out, nil
	}
	raws := make([][]byte, len(pending))
	for j, i := range pending {
		raws[j] = out[i]
	}
	var res Result
	var err error
	if ws != nil {
		pendingItems := make([]*store.Item, len(pending))
		for j, i := range pending {
			pendingItems[j] = items[i]
		}
		res, err = ws.convertSplit(ctx, raws, pendingItems, needs, to)
	} else {
		res, err = conv.Convert(ctx, raws, to)
	}
	if err != nil {
		return nil, err
	}
	for j, i := range pending {
		var raw []byte
		if res.changedAt(j) && !bytes.Equal(res.Objects[j], raws[j]) {
			raw = res.Objects[j]
		}
		out[i] = res.Objects[j]
		remember(items[i], conv, to, raw)
	}
	return out, nil
}

// splitMin is how many objects a list converts, at least, before the work
// is split across the CPUs: each part decodes, prunes, defaults, converts
// and encodes its objects on a goroutine of its own (a webhook gets a
// request per part). The first list after a CRD edit re-does this for
// every object, the webhook's answers aside.
const splitMin = 512

// convertSplit is convert, split into parts run at the same time when
// there are enough objects and CPUs. The result is convert's: objects in
// order, and the first part's error if parts fail.
func (s *WithSchemas) convertSplit(ctx context.Context, objs [][]byte, items []*store.Item, needs []need, to string) (Result, error) {
	parts := min(runtime.GOMAXPROCS(0), len(objs)/(splitMin/2))
	if parts < 2 || len(objs) < splitMin {
		return s.convert(ctx, objs, items, needs, to)
	}
	size := (len(objs) + parts - 1) / parts
	results := make([]Result, parts)
	errs := make([]error, parts)
	var wg sync.WaitGroup
	for p := range parts {
		lo, hi := p*size, min((p+1)*size, len(objs))
		wg.Go(func() {
			results[p], errs[p] = s.convert(ctx, objs[lo:hi], items[lo:hi], needs[lo:hi], to)
		})
	}
	wg.Wait()
	out := Result{Objects: make([][]byte, 0, len(objs)), Changed: make([]bool, 0, len(objs))}
	for p, r := range results {
		if errs[p] != nil {
			return Result{}, errs[p]
		}
		out.Objects = append(out.Objects, r.Objects...)
		for i := range r.Objects {
			out.Changed = append(out.Changed, r.changedAt(i))
		}
	}
	return out, nil
}

// ServedMayDiffer reports whether conv may serve an object otherwise than
// as stored in a way selectors see: true for a CRD's converter, whose
// selectable fields and labels are read from the object as served; false
// for a built-in resource's, whose field labels read the stored form.
func ServedMayDiffer(conv Converter) bool {
	_, ok := conv.(*WithSchemas)
	return ok
}

// ServedAsStored reports whether conv serves a cached object in version to
// exactly as the cache holds it (it.Raw), so that what selectors read of
// the item (its labels, its stored fields) is what the client gets. A
// built-in resource's converter answers true: its field labels read the
// stored form.
func ServedAsStored(conv Converter, it *store.Item, to string) bool {
	ws, ok := conv.(*WithSchemas)
	if !ok {
		return true
	}
	if n := ws.itemNeed(it); n != needAll && ws.itemServedAsStored(it, n, to) {
		return true
	}
	r, ok := lookup(it, conv, to)
	return ok && r.raw == nil
}
