package conversion

import (
	"bytes"
	"context"

	"github.com/crdserver/crdserver/internal/store"
)

// maxRemembered is how many versions a cached object remembers.
const maxRemembered = 4

// remembered is a cached object converted by one converter to one version;
// an item's memo holds a short list of them, newest first, so that readers
// of different versions do not undo each other's work.
type remembered struct {
	conv Converter
	to   string
	// raw is the converted object; nil when the conversion left the stored
	// encoding as it was.
	raw  []byte
	next *remembered
}

func lookup(it *store.Item, conv Converter, to string) (*remembered, bool) {
	m := it.Memo()
	if m == nil {
		return nil, false
	}
	head, _ := m.Load().(*remembered)
	for r := head; r != nil; r = r.next {
		if r.conv == conv && r.to == to {
			return r, true
		}
	}
	return nil, false
}

func remember(it *store.Item, conv Converter, to string, raw []byte) {
	m := it.Memo()
	if m == nil {
		return
	}
	m.Update(func(old any) any {
		head := &remembered{conv: conv, to: to, raw: raw}
		tail, n := head, 1
		for o, _ := old.(*remembered); o != nil && n < maxRemembered; o = o.next {
			if o.conv == conv && o.to == to {
				continue
			}
			tail.next = &remembered{conv: o.conv, to: o.to, raw: o.raw}
			tail = tail.next
			n++
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
		out[i] = it.Raw
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
		res, err = ws.convert(ctx, raws, needs, to)
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
