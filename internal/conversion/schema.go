package conversion

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/crdserver/crdserver/internal/jsonraw"
	"github.com/crdserver/crdserver/internal/schema"
	"github.com/crdserver/crdserver/internal/store"
)

// WithSchemas is a CRD's converter as Kubernetes' storage codec and
// converter are one: an object read from storage is first read the way
// Kubernetes' storage decoder reads it, in the version it is stored in
// (schema.Version.NormalizeStored: ObjectMeta coerced, unknown fields
// pruned, the stored version's defaults applied), then converted by Inner,
// and what Inner converted is pruned by the target version's schema.
// Nothing is defaulted after conversion: the defaults of the version a
// client reads are not applied to what it reads, and the storage
// version's defaults are not written when an object of another version is
// stored (Kubernetes' schemaCoercingConverter prunes only).
//
// Which objects need the storage decoder's work is decided per object
// (see need): what this process's write path wrote under these very
// schemas needs nothing (or only the stored version's defaults), anything
// else needs all of it. Items knows that of cached objects; Convert, which
// sees only encoded objects, takes every object with a resourceVersion as
// read from storage, of unknown origin.
type WithSchemas struct {
	Inner Converter
	// Schemas are the compiled schemas by apiVersion.
	Schemas map[string]*schema.Version
	// SchemaRev is the revision of the CRD write that brought Schemas;
	// what this process writes under them is stamped with it
	// (store.WriteStamp.Epoch).
	SchemaRev int64
	// StorageVersion is the apiVersion objects are written in; empty for
	// a converter that does not serve a store, for which every object
	// without a resourceVersion is taken as read.
	StorageVersion string
}

// need is what an object needs before it is converted.
type need uint8

const (
	// needNothing: written by this process under these schemas, with the
	// defaults of the version it is stored in.
	needNothing need = iota
	// needDefaults: as needNothing, but the defaults of its version may
	// be missing (it was written in another version).
	needDefaults
	// needAll: of unknown origin (another replica, etcd directly, this
	// process before the schema changed): all that Kubernetes' storage
	// decoder does.
	needAll
)

// itemNeed is what a cached object needs.
func (s *WithSchemas) itemNeed(it *store.Item) need {
	if w := it.Written; w != nil && w.Epoch == s.SchemaRev {
		if w.Defaulted {
			return needNothing
		}
		return needDefaults
	}
	return needAll
}

// rawNeed is what an encoded object needs: one with a resourceVersion is
// read from storage, of unknown origin; one without comes from the write
// path, normalized in its version already: on its way to storage nothing
// is added to it (Kubernetes' storage encoder converts and prunes), on its
// way to a client (a dry run's answer) the defaults of its version are,
// as Kubernetes' storage decoder adds them. hasRV says whether it has a
// resourceVersion.
func (s *WithSchemas) rawNeed(hasRV bool, from, to string) need {
	if hasRV {
		return needAll
	}
	if s.StorageVersion != "" && to == s.StorageVersion && from != to {
		return needNothing
	}
	return needDefaults
}

// decodedRV is the resourceVersion of a decoded object, as
// jsonraw.ResourceVersion reads it (0: none, or not a number).
func decodedRV(m map[string]any) int64 {
	md, _ := m["metadata"].(map[string]any)
	rv, _ := md["resourceVersion"].(string)
	n, _ := strconv.ParseInt(rv, 10, 64)
	return n
}

// itemServedAsStored reports whether a cached item that needs n (not
// needAll) is served in version to as cached. What this process wrote
// under these schemas is in their storage version: no need to read it.
func (s *WithSchemas) itemServedAsStored(it *store.Item, n need, to string) bool {
	from := s.StorageVersion
	if from == "" {
		from, _, _ = jsonraw.String(it.Bytes(), "apiVersion")
	}
	return s.asStored(n, from, to)
}

// asStored reports whether an object stored in from, needing n, is served
// in version to as it is.
func (s *WithSchemas) asStored(n need, from, to string) bool {
	if from != to {
		return false
	}
	switch n {
	case needNothing:
		return true
	case needDefaults:
		return !s.Schemas[from].HasDefaults()
	}
	return false
}

// decodeObject decodes an encoded object as Kubernetes' decoder does
// (integers as int64), the quick way when it can.
func decodeObject(raw []byte) (map[string]any, error) {
	if m, ok := jsonraw.Decode(raw); ok {
		return m, nil
	}
	var m map[string]any
	if err := utiljson.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	return m, nil
}

// Convert implements Converter.
func (s *WithSchemas) Convert(ctx context.Context, objs [][]byte, to string) (Result, error) {
	return s.convert(ctx, objs, nil, nil, nil, to)
}

// batch is one conversion in progress: the objects as they are, decoded
// when a step needed them.
type batch struct {
	objs  [][]byte
	from  []string
	maps  []map[string]any // decoded (and normalized), nil: not decoded
	dirty []bool           // maps[i] differs from objs[i]
}

func (b *batch) decoded(i int) (map[string]any, error) {
	if b.maps[i] == nil {
		m, err := decodeObject(b.objs[i])
		if err != nil {
			return nil, apierrors.NewInternalError(fmt.Errorf("stored object: %w", err))
		}
		b.maps[i] = m
	}
	return b.maps[i], nil
}

// current is object i as it is now, encoded.
func (b *batch) current(i int) ([]byte, error) {
	if !b.dirty[i] {
		return b.objs[i], nil
	}
	return encode(b.maps[i])
}

func encode(m map[string]any) ([]byte, error) {
	out, err := json.Marshal(m)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	return out, nil
}

// normalize gives each object what it needs (see need), in the version it
// is stored in.
func (s *WithSchemas) normalize(b *batch, needs []need) error {
	for i := range b.objs {
		v := s.Schemas[b.from[i]]
		switch {
		case needs[i] == needAll && v != nil:
			m, err := b.decoded(i)
			if err != nil {
				return err
			}
			changed, err := v.NormalizeStored(m)
			if err != nil {
				return apierrors.NewInternalError(fmt.Errorf("stored object cannot be read as %s: %w", b.from[i], err))
			}
			b.dirty[i] = b.dirty[i] || changed
		case needs[i] == needDefaults && v.HasDefaults():
			m, err := b.decoded(i)
			if err != nil {
				return err
			}
			b.dirty[i] = v.DefaultStored(m) || b.dirty[i]
		}
	}
	return nil
}

// convert normalizes objs as needs say (nil: as rawNeed says), converts
// them to to, and prunes what was converted with the schema of to. items,
// when given, are the cached objects objs are: what Inner answered for
// them is remembered in their memos, and not asked again for the same
// object sent (see remembered) until it is due, or claimed to be asked
// again by the caller (rechecks, when given: the answers it claimed).
func (s *WithSchemas) convert(ctx context.Context, objs [][]byte, items []*store.Item, needs []need, rechecks []*answer, to string) (Result, error) {
	b := &batch{objs: objs, from: make([]string, len(objs)), maps: make([]map[string]any, len(objs)), dirty: make([]bool, len(objs))}
	for i, o := range objs {
		av, _, err := jsonraw.String(o, "apiVersion")
		if err != nil {
			return Result{}, apierrors.NewInternalError(err)
		}
		b.from[i] = av
	}
	var inMap func(m map[string]any) error
	switch inner := s.Inner.(type) {
	case None:
		inMap = func(m map[string]any) error { m["apiVersion"] = to; return nil }
	case *Rules:
		inMap = func(m map[string]any) error {
			if err := inner.ConvertObject(m, to); err != nil {
				return fmt.Errorf("declarative conversion: %w", err)
			}
			return nil
		}
	}
	if needs == nil {
		needs = make([]need, len(objs))
		// The request's own write, if it made one (the answer to it
		// need not be read as from storage).
		written := store.WrittenFrom(ctx)
		for i, o := range objs {
			var rv int64
			if inMap != nil && b.from[i] != to && written == nil {
				// Decoded to be converted anyway: read it there.
				m, err := b.decoded(i)
				if err != nil {
					return Result{}, err
				}
				rv = decodedRV(m)
			} else {
				rv, _ = jsonraw.ResourceVersion(o)
			}
			needs[i] = s.rawNeed(rv != 0, b.from[i], to)
			if rv != 0 && written != nil {
				// The answer to this request's own write.
				if w := written.Vouches(o, rv); w != nil && w.Epoch == s.SchemaRev {
					needs[i] = needDefaults
					if w.Defaulted {
						needs[i] = needNothing
					}
				}
			}
		}
	}
	if err := s.normalize(b, needs); err != nil {
		return Result{}, err
	}
	target := s.Schemas[to]
	res := Result{Objects: append([][]byte(nil), objs...), Changed: make([]bool, len(objs))}
	if inMap != nil {
		// Converted in place, decoded once.
		for i := range objs {
			if b.from[i] == to {
				if b.dirty[i] {
					out, err := encode(b.maps[i])
					if err != nil {
						return Result{}, err
					}
					res.Objects[i], res.Changed[i] = out, true
				}
				continue
			}
			m, err := b.decoded(i)
			if err != nil {
				return Result{}, err
			}
			if err := inMap(m); err != nil {
				return Result{}, err
			}
			if err := target.CoerceStored(m); err != nil {
				return Result{}, apierrors.NewInternalError(err)
			}
			out, err := encode(m)
			if err != nil {
				return Result{}, err
			}
			res.Objects[i], res.Changed[i] = out, true
		}
		return res, nil
	}
	// Another converter (a webhook) takes the objects encoded.
	in := make([][]byte, len(objs))
	for i := range objs {
		out, err := b.current(i)
		if err != nil {
			return Result{}, err
		}
		in[i] = out
		if b.dirty[i] {
			res.Objects[i], res.Changed[i] = out, true
		}
	}
	conv, err := s.innerConvert(ctx, in, items, rechecks, to)
	if err != nil {
		return Result{}, err
	}
	res.answers = conv.answers
	for i := range objs {
		if !conv.changedAt(i) {
			continue
		}
		m, err := decodeObject(conv.Objects[i])
		if err != nil {
			return Result{}, apierrors.NewInternalError(err)
		}
		if err := target.CoerceStored(m); err != nil {
			return Result{}, apierrors.NewInternalError(err)
		}
		out, err := encode(m)
		if err != nil {
			return Result{}, err
		}
		res.Objects[i], res.Changed[i] = out, true
	}
	return res, nil
}

// innerConvert converts in (the objects as Inner takes them) with Inner,
// taking from the memos of items (when given) what Inner answered before
// for the same object, and remembering the rest. An answer of a webhook
// is taken while it is not due (see answer); a due one is asked again by
// the reader that claims it, in one batch with the objects not
// remembered, as are the answers in rechecks (claimed by the caller).
// What the webhook answers replaces them; when it fails, they are
// forgotten, and the error is the one a first conversion gets.
func (s *WithSchemas) innerConvert(ctx context.Context, in [][]byte, items []*store.Item, rechecks []*answer, to string) (Result, error) {
	if items == nil {
		return s.Inner.Convert(ctx, in, to)
	}
	interval, checked := recheckInterval(s.Inner)
	res := Result{Objects: make([][]byte, len(in)), Changed: make([]bool, len(in))}
	if checked {
		res.answers = make([]*answer, len(in))
	}
	hashes := make([][sha256.Size]byte, len(in))
	var pending []int
	var asked []*answer // the answers asked again, by pending
	var releases []func()
	var now int64
	for i := range in {
		if av, _, _ := jsonraw.String(in[i], "apiVersion"); av == to {
			// Nothing to convert: not worth a memo.
			res.Objects[i] = in[i]
			continue
		}
		if checked && interval < 0 {
			// Not kept: asked every time.
			pending = append(pending, i)
			asked = append(asked, nil)
			continue
		}
		hashes[i] = sha256.Sum256(in[i])
		if rechecks != nil && rechecks[i] != nil {
			pending = append(pending, i)
			asked = append(asked, rechecks[i])
			continue
		}
		if r, ok := lookupIn(items[i], s.Inner, to, hashes[i]); ok {
			if r.answer != nil {
				if now == 0 {
					now = clock()
				}
				if claimed, release := r.answer.claim(now, interval); claimed {
					pending = append(pending, i)
					asked = append(asked, r.answer)
					releases = append(releases, release)
					continue
				}
				res.answers[i] = r.answer
			}
			res.Objects[i] = in[i]
			if r.raw != nil {
				res.Objects[i], res.Changed[i] = r.raw, true
			}
			continue
		}
		pending = append(pending, i)
		asked = append(asked, nil)
	}
	if len(pending) == 0 {
		return res, nil
	}
	ask := make([][]byte, len(pending))
	for j, i := range pending {
		ask[j] = in[i]
	}
	// Each object's answer is claimed on its own.
	var fresh []answer
	if checked && interval >= 0 {
		fresh = make([]answer, len(pending))
		at := clock()
		for j := range fresh {
			fresh[j].at = at
		}
	}
	got, err := s.Inner.Convert(ctx, ask, to)
	if err != nil {
		if ctx.Err() == nil {
			// The webhook fails: what it answered before is not served
			// any more.
			for j, i := range pending {
				if asked[j] != nil {
					forget(items[i], asked[j])
				}
			}
		}
		for _, release := range releases {
			release()
		}
		return Result{}, err
	}
	for j, i := range pending {
		res.Objects[i] = got.Objects[j]
		var raw []byte
		if got.changedAt(j) {
			res.Changed[i] = true
			raw = got.Objects[j]
		}
		var a *answer
		switch {
		case fresh != nil:
			a = &fresh[j]
		case checked:
			a = unkept
		}
		if checked {
			res.answers[i] = a
		}
		if a != unkept {
			rememberIn(items[i], s.Inner, to, hashes[i], raw, a)
		}
	}
	return res, nil
}

// Stored returns an object read from storage as Kubernetes' storage
// decoder reads it, in the version it is stored in, converting nothing:
// what a deletion needs of it (conversion must not stand in its way). A
// converter that is not a CRD's returns it as it is.
func Stored(conv Converter, raw []byte) ([]byte, error) {
	s, ok := conv.(*WithSchemas)
	if !ok {
		return raw, nil
	}
	from, _, err := jsonraw.String(raw, "apiVersion")
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	b := &batch{objs: [][]byte{raw}, from: []string{from}, maps: make([]map[string]any, 1), dirty: make([]bool, 1)}
	if err := s.normalize(b, []need{needAll}); err != nil {
		return nil, err
	}
	return b.current(0)
}

// SchemaRevOf returns the schema revision of a CRD's converter (see
// WithSchemas.SchemaRev); false for other converters.
func SchemaRevOf(conv Converter) (int64, bool) {
	if s, ok := conv.(*WithSchemas); ok {
		return s.SchemaRev, true
	}
	return 0, false
}

// Close closes Inner.
func (s *WithSchemas) Close() { Close(s.Inner) }
