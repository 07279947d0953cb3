package conversion

import (
	"bytes"
	"context"
	"crypto/sha256"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

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
	raw []byte
	// answer is the webhook answer the conversion holds, shared by the
	// entries made of it (the strategy's, and its CRD converters'); nil
	// for a conversion that holds none, which is kept as long as the item.
	answer *answer
	next   *remembered
}

// answer is when a webhook answer a memo keeps was asked for, and when a
// reader last set out to ask again: an answer is kept for its webhook's
// recheck interval (see Options.RecheckInterval), then asked again by the
// first reader to claim it, once per interval, while the others go on
// with the answer they have.
type answer struct {
	// at is clock() when the answer was asked for.
	at int64
	// asked is clock() when a reader last claimed to ask again (0: never).
	asked atomic.Int64
}

// clock reads a monotonic clock in nanoseconds.
var clock = func() int64 { return int64(time.Since(clockStart)) }

var clockStart = time.Now()

// unkept marks, in a Result, the objects whose conversion holds a webhook
// answer that is not to be kept (a recheck interval below zero).
var unkept = &answer{}

// claim reports whether the caller is the one to ask again at now: the
// answer is due and no other reader claimed it first. The claim holds for
// an interval; release gives it back.
func (a *answer) claim(now int64, interval time.Duration) (claimed bool, release func()) {
	last := a.asked.Load()
	if now-max(a.at, last) < int64(interval) || !a.asked.CompareAndSwap(last, now) {
		return false, nil
	}
	return true, func() { a.asked.CompareAndSwap(now, last) }
}

// recheckInterval is how long a converter's answers are kept before they
// are asked again, when it is a converter whose answers are checked again
// (a webhook): below zero, answers are not kept.
func recheckInterval(c Converter) (time.Duration, bool) {
	r, ok := c.(interface{ recheckInterval() time.Duration })
	if !ok {
		return 0, false
	}
	return r.recheckInterval(), true
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

func remember(it *store.Item, conv Converter, to string, raw []byte, a *answer) {
	rememberIn(it, conv, to, [sha256.Size]byte{}, raw, a)
}

// rememberIn remembers a conversion, made of the webhook answer a (nil:
// of none), in place of the one remembered for conv and to, unless that
// one holds a newer answer.
func rememberIn(it *store.Item, conv Converter, to string, in [sha256.Size]byte, raw []byte, a *answer) {
	m := it.Memo()
	if m == nil {
		return
	}
	var zero [sha256.Size]byte
	m.Update(func(old any) any {
		if a != nil {
			for o, _ := old.(*remembered); o != nil; o = o.next {
				if o.conv == conv && o.to == to && o.answer != nil && o.answer.at > a.at {
					return old
				}
			}
		}
		head := &remembered{conv: conv, to: to, in: in, raw: raw, answer: a}
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
			tail.next = &remembered{conv: o.conv, to: o.to, in: o.in, raw: o.raw, answer: o.answer}
			tail = tail.next
		}
		return head
	})
}

// forget drops from an item's memo every conversion made of the webhook
// answer a.
func forget(it *store.Item, a *answer) {
	m := it.Memo()
	if m == nil {
		return
	}
	m.Update(func(old any) any {
		found := false
		for o, _ := old.(*remembered); o != nil && !found; o = o.next {
			found = o.answer == a
		}
		if !found {
			return old
		}
		var head, tail *remembered
		for o, _ := old.(*remembered); o != nil; o = o.next {
			if o.answer == a {
				continue
			}
			r := &remembered{conv: o.conv, to: o.to, in: o.in, raw: o.raw, answer: o.answer}
			if head == nil {
				head = r
			} else {
				tail.next = r
			}
			tail = r
		}
		if head == nil {
			return nil
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
//
// A conversion that holds a webhook's answer is kept for the webhook's
// recheck interval: the first reader after it asks the webhook again, for
// all such objects it reads in one batch, and remembers the new answer
// (or fails as a first conversion fails, and forgets the old one); readers
// meanwhile are served the answer kept.
func Items(ctx context.Context, conv Converter, items []*store.Item, to string) ([][]byte, error) {
	out := make([][]byte, len(items))
	for i, it := range items {
		out[i] = it.Bytes()
	}
	return itemsFrom(ctx, conv, items, out, to, false)
}

// lazyChunk is how many objects ItemsLazy uncompresses at a time.
const lazyChunk = 2048

// ItemsLazy is Items for a reader that writes the objects out itself: an
// object served exactly as the cache keeps it compressed (store.Item.Packed)
// is nil in the answer, to be read from its item (AppendBytes) as it is
// written, so that a list of a million objects is not uncompressed whole.
// The others are as Items gives them.
func ItemsLazy(ctx context.Context, conv Converter, items []*store.Item, to string) ([][]byte, error) {
	out := make([][]byte, len(items))
	for lo := 0; lo < len(items); lo += lazyChunk {
		chunk := items[lo:min(lo+lazyChunk, len(items))]
		in := out[lo : lo+len(chunk)]
		for i, it := range chunk {
			in[i] = it.Raw // nil if packed
		}
		if _, err := itemsFrom(ctx, conv, chunk, in, to, true); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// noneLazy is itemsFrom for the None converter, lazy: a packed item is
// read to be converted, and left nil if its version is the one asked for.
func noneLazy(ctx context.Context, conv Converter, items []*store.Item, out [][]byte, to string) ([][]byte, error) {
	var in [][]byte
	for i, it := range items {
		if out[i] == nil {
			if in == nil {
				in = slices.Clone(out)
			}
			in[i] = it.Bytes()
		}
	}
	if in == nil {
		res, err := conv.Convert(ctx, out, to)
		return res.Objects, err
	}
	res, err := conv.Convert(ctx, in, to)
	if err != nil {
		return nil, err
	}
	for i := range items {
		if out[i] != nil || res.changedAt(i) {
			out[i] = res.Objects[i]
		}
	}
	return out, nil
}

// itemsFrom is Items, given the items' bytes in out (which it fills with
// the answer). lazy is ItemsLazy's: out is nil for a packed item, and is
// left nil for one served as it is.
func itemsFrom(ctx context.Context, conv Converter, items []*store.Item, out [][]byte, to string, lazy bool) ([][]byte, error) {
	if _, trivial := conv.(None); trivial {
		if lazy {
			return noneLazy(ctx, conv, items, out, to)
		}
		res, err := conv.Convert(ctx, out, to)
		return res.Objects, err
	}
	ws, _ := conv.(*WithSchemas)
	var interval time.Duration
	var now int64
	if ws != nil {
		interval, _ = recheckInterval(ws.Inner)
	}
	var pending []int
	var needs []need
	var rechecks []*answer
	var releases []func()
	for i, it := range items {
		var n need
		if ws != nil {
			n = ws.itemNeed(it)
			if n != needAll && ws.itemServedAsStored(it, n, to) {
				continue
			}
		}
		var recheck *answer
		if r, ok := lookup(it, conv, to); ok {
			if r.answer == nil {
				if r.raw != nil {
					out[i] = r.raw
				}
				continue
			}
			if now == 0 {
				now = clock()
			}
			claimed, release := r.answer.claim(now, interval)
			if !claimed {
				if r.raw != nil {
					out[i] = r.raw
				}
				continue
			}
			recheck = r.answer
			releases = append(releases, release)
		}
		pending = append(pending, i)
		needs = append(needs, n)
		if recheck != nil && rechecks == nil {
			rechecks = make([]*answer, len(pending)-1, len(items))
		}
		if rechecks != nil {
			rechecks = append(rechecks, recheck)
		}
	}
	if len(pending) == 0 {
		return out, nil
	}
	raws := make([][]byte, len(pending))
	for j, i := range pending {
		raws[j] = out[i]
		if raws[j] == nil {
			raws[j] = items[i].Bytes()
		}
	}
	var res Result
	var err error
	if ws != nil {
		pendingItems := make([]*store.Item, len(pending))
		for j, i := range pending {
			pendingItems[j] = items[i]
		}
		res, err = ws.convertSplit(ctx, raws, pendingItems, needs, rechecks, to)
	} else {
		res, err = conv.Convert(ctx, raws, to)
	}
	if err != nil {
		// The answers not asked again are asked by the next reader.
		for _, release := range releases {
			release()
		}
		return nil, err
	}
	for j, i := range pending {
		var raw []byte
		if res.changedAt(j) && !bytes.Equal(res.Objects[j], raws[j]) {
			raw = res.Objects[j]
		}
		out[i] = res.Objects[j]
		if lazy && raw == nil && items[i].Packed() {
			out[i] = nil // served as kept
		}
		if a := res.answerAt(j); a != unkept {
			remember(items[i], conv, to, raw, a)
		}
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
func (s *WithSchemas) convertSplit(ctx context.Context, objs [][]byte, items []*store.Item, needs []need, rechecks []*answer, to string) (Result, error) {
	parts := min(runtime.GOMAXPROCS(0), len(objs)/(splitMin/2))
	if parts < 2 || len(objs) < splitMin {
		return s.convert(ctx, objs, items, needs, rechecks, to)
	}
	size := (len(objs) + parts - 1) / parts
	results := make([]Result, parts)
	errs := make([]error, parts)
	var wg sync.WaitGroup
	for p := range parts {
		lo, hi := p*size, min((p+1)*size, len(objs))
		var partRechecks []*answer
		if rechecks != nil {
			partRechecks = rechecks[lo:hi]
		}
		wg.Go(func() {
			results[p], errs[p] = s.convert(ctx, objs[lo:hi], items[lo:hi], needs[lo:hi], partRechecks, to)
		})
	}
	wg.Wait()
	out := Result{Objects: make([][]byte, 0, len(objs)), Changed: make([]bool, 0, len(objs))}
	for p, r := range results {
		if errs[p] != nil {
			return Result{}, errs[p]
		}
		if r.answers != nil && out.answers == nil {
			out.answers = make([]*answer, len(out.Objects), len(objs))
		}
		out.Objects = append(out.Objects, r.Objects...)
		for i := range r.Objects {
			out.Changed = append(out.Changed, r.changedAt(i))
			if out.answers != nil {
				out.answers = append(out.answers, r.answerAt(i))
			}
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
