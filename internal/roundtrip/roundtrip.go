package roundtrip

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/crdserver/crdserver/internal/conversion"
	"github.com/crdserver/crdserver/internal/schema"
)

// Admitter is a converter that stores objects, as a server does: Admit
// writes objs (encoded, each in its own apiVersion) and returns them as
// written, read in the same version. A round trip through an Admitter
// starts from what Admit returns rather than from the sample defaulted
// and pruned in process; a version that is not the storage version is
// checked on the way too, since writing in it and reading it back
// converts it to the storage version and back.
type Admitter interface {
	conversion.Converter
	Admit(ctx context.Context, objs [][]byte) ([][]byte, error)
}

// Kind is what happened to a value on a round trip.
type Kind string

const (
	// Lost is a value that the round trip dropped.
	Lost Kind = "lost"
	// Changed is a value that came back different, or that appeared.
	Changed Kind = "changed"
	// Failed is a conversion (or a write, through a server) that failed.
	Failed Kind = "failed"
)

// Loss is one value lost or changed by the round trip From→To→From of one
// object, or a failed conversion of it.
type Loss struct {
	Kind Kind   `json:"kind"`
	From string `json:"from"` // the version the object started in (A)
	To   string `json:"to"`   // the version it was converted to (B)
	// Object names the object: metadata.name, with its namespace before
	// it (namespace/name) when it has one other than "default".
	Object string `json:"object"`
	// Path is the value's field path (spec.ports[0].name, or
	// spec.labels["x.y"] for a key that is not an identifier).
	Path string `json:"path,omitempty"`
	// Original and After are the JSON values before and after the round
	// trip; nil when the field is absent on that side.
	Original json.RawMessage `json:"original,omitempty"`
	After    json.RawMessage `json:"after,omitempty"`
	// Error is why a conversion failed (Kind Failed).
	Error string `json:"error,omitempty"`
}

// maxShown bounds a value in Loss.String.
const maxShown = 200

// String is the loss on one line:
//
//	lost v1→v2→v1 object=widget-v1-003 path=spec.note original="x" after=<absent>
//	failed v1→v2→v1 object=widget-v1-004 error=converting v1 to v2: ...
func (l Loss) String() string {
	trip := l.From + "→" + l.To + "→" + l.From
	if l.Kind == Failed {
		return fmt.Sprintf("failed %s object=%s error=%s", trip, l.Object, cut(strings.Join(strings.Fields(l.Error), " "), 1000))
	}
	return fmt.Sprintf("%s %s object=%s path=%s original=%s after=%s", l.Kind, trip, l.Object, l.Path, show(l.Original), show(l.After))
}

// show is a value as JSON (on one line: JSON strings escape their line
// breaks), cut to maxShown characters.
func show(raw json.RawMessage) string {
	if raw == nil {
		return "<absent>"
	}
	return cut(string(raw), maxShown)
}

func cut(s string, n int) string {
	if utf8.RuneCountInString(s) > n {
		s = string([]rune(s)[:n]) + "…"
	}
	return s
}

// Options tune a round trip.
type Options struct {
	// Strict counts a field absent on one side and empty on the other ("",
	// 0, false, null, [], or a map of only such values) as a loss.
	Strict bool
}

// RoundTrip converts every sample of every served version (samples, by
// version name) to each other served version and back with conv, and
// returns what was lost or changed, and which conversions failed, in a
// stable order: by version (as the CRD lists them), then object (as
// samples lists them), then path. An object converted to B must be valid
// under B's schema (a client that reads it in B must be able to write it
// back): one that is not is a failure too (through an Admitter, the
// server says so when the object is written in B). The error is for what
// stops the check itself: samples of a version that is not served, a
// schema that does not compile, ctx ending.
func RoundTrip(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, conv conversion.Converter, samples map[string][]map[string]any) ([]Loss, error) {
	return RoundTripWithOptions(ctx, crd, conv, samples, Options{})
}

// RoundTripWithOptions is RoundTrip with options.
func RoundTripWithOptions(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, conv conversion.Converter, samples map[string][]map[string]any, opts Options) ([]Loss, error) {
	served := ServedVersions(crd)
	index := map[string]int{}
	for i, v := range served {
		index[v] = i
	}
	for v := range samples {
		if _, ok := index[v]; !ok {
			return nil, fmt.Errorf("samples of version %q, which CRD %s does not serve", v, crd.Name)
		}
	}
	r := &run{crd: crd, conv: conv, served: served, index: index, opts: opts}
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			r.storage = v.Name
		}
	}
	for ai, a := range served {
		if len(samples[a]) == 0 {
			continue
		}
		originals, names, err := r.originals(ctx, ai, samples[a])
		if err != nil {
			return nil, err
		}
		for bi, b := range served {
			if b != a {
				if err := r.trip(ctx, ai, bi, originals, names); err != nil {
					return nil, err
				}
			}
		}
	}
	return r.sorted(), nil
}

// originals are the objects the round trips of samples of served[ai]
// start from, and their names: the samples defaulted and pruned in
// process, or, through an Admitter, as it wrote them (nil for those it
// could not write, a failure).
func (r *run) originals(ctx context.Context, ai int, objs []map[string]any) ([]map[string]any, []string, error) {
	a := r.served[ai]
	compiled, err := schema.Compile(r.crd, a)
	if err != nil {
		return nil, nil, err
	}
	names := make([]string, len(objs))
	normalized := make([]map[string]any, len(objs))
	for i, o := range objs {
		names[i] = ObjectName(o)
		if normalized[i], err = clone(o); err != nil {
			return nil, nil, fmt.Errorf("sample %s of %s: %w", names[i], a, err)
		}
		if compiled != nil {
			if _, err := compiled.Coerce(normalized[i], false); err != nil {
				return nil, nil, fmt.Errorf("sample %s of %s: %w", names[i], a, err)
			}
			compiled.Default(normalized[i])
		}
	}
	admitter, ok := r.conv.(Admitter)
	if !ok {
		return normalized, names, nil
	}
	// The samples as they are: the server defaults and prunes.
	admitted, errs, err := each(ctx, objs, func(ctx context.Context, objs []map[string]any) ([]map[string]any, error) {
		in, err := encodeAll(objs)
		if err != nil {
			return nil, err
		}
		out, err := admitter.Admit(ctx, in)
		if err != nil {
			return nil, err
		}
		return decodeAll(out, "admitted object")
	})
	if err != nil {
		return nil, nil, err
	}
	for i := range objs {
		if errs[i] != nil {
			for bi, b := range r.served {
				if b != a {
					r.fail(ai, bi, i, names[i], fmt.Sprintf("writing it in %s: %v", a, errs[i]))
				}
			}
			continue
		}
		// Written in A and read back in A, it went to the storage version
		// and back.
		if s, ok := r.index[r.storage]; ok && a != r.storage {
			r.compare(ai, s, i, names[i], userMeta(normalized[i]), userMeta(admitted[i]))
		}
	}
	return admitted, names, nil
}

// trip converts originals (of served[ai]) to served[bi] and back, and
// compares.
func (r *run) trip(ctx context.Context, ai, bi int, originals []map[string]any, names []string) error {
	a, b := r.served[ai], r.served[bi]
	_, admits := r.conv.(Admitter)
	var idx []int
	var in []map[string]any
	for i, o := range originals {
		if o != nil {
			idx = append(idx, i)
			in = append(in, o)
		}
	}
	there, errs, err := each(ctx, in, func(ctx context.Context, objs []map[string]any) ([]map[string]any, error) {
		return convert(ctx, r.conv, objs, r.crd.Spec.Group+"/"+b)
	})
	if err != nil {
		return err
	}
	var backIdx []int
	var back []map[string]any
	for j, i := range idx {
		if errs[j] != nil {
			r.fail(ai, bi, i, names[i], fmt.Sprintf("converting %s to %s: %v", a, b, errs[j]))
			continue
		}
		// What a client reads in B it must be able to write back in B (a
		// server checks that when the object is written in B).
		if !admits {
			if err := r.valid(ctx, b, there[j]); err != nil {
				r.fail(ai, bi, i, names[i], fmt.Sprintf("its %s form is not valid in %s: %v", b, b, err))
				continue
			}
		}
		backIdx = append(backIdx, i)
		back = append(back, there[j])
	}
	home, errs, err := each(ctx, back, func(ctx context.Context, objs []map[string]any) ([]map[string]any, error) {
		return convert(ctx, r.conv, objs, r.crd.Spec.Group+"/"+a)
	})
	if err != nil {
		return err
	}
	for j, i := range backIdx {
		if errs[j] != nil {
			r.fail(ai, bi, i, names[i], fmt.Sprintf("converting %s back to %s: %v", b, a, errs[j]))
			continue
		}
		r.compare(ai, bi, i, names[i], originals[i], home[j])
	}
	return nil
}

// userMeta is obj with only the metadata a client writes and a
// conversion keeps: name, namespace, labels and annotations (a copy of
// a live object is written without the rest).
func userMeta(obj map[string]any) map[string]any {
	md, _ := obj["metadata"].(map[string]any)
	kept := map[string]any{}
	for _, f := range []string{"name", "namespace", "labels", "annotations"} {
		if v, ok := md[f]; ok {
			kept[f] = v
		}
	}
	out := make(map[string]any, len(obj))
	for k, v := range obj {
		out[k] = v
	}
	out["metadata"] = kept
	return out
}

// ServedVersions are the names of the served versions of crd, in the
// order the CRD lists them.
func ServedVersions(crd *apiextensionsv1.CustomResourceDefinition) []string {
	var out []string
	for _, v := range crd.Spec.Versions {
		if v.Served {
			out = append(out, v.Name)
		}
	}
	return out
}

// ObjectName names an object in a Loss: namespace/name, or name alone for
// a cluster-scoped object or one in the namespace "default".
func ObjectName(obj map[string]any) string {
	md, _ := obj["metadata"].(map[string]any)
	name, _ := md["name"].(string)
	if ns, _ := md["namespace"].(string); ns != "" && ns != "default" {
		return ns + "/" + name
	}
	return name
}

// run collects the losses of one RoundTrip with what sorts them.
type run struct {
	crd     *apiextensionsv1.CustomResourceDefinition
	conv    conversion.Converter
	served  []string
	index   map[string]int // of served
	storage string
	opts    Options
	losses  []sortedLoss
	seen    map[string]bool
	schemas map[string]*schema.Version
}

// valid checks obj as a server checks a new object of version: pruned,
// defaulted (a copy) and validated.
func (r *run) valid(ctx context.Context, version string, obj map[string]any) error {
	v, ok := r.schemas[version]
	if !ok {
		var err error
		if v, err = schema.Compile(r.crd, version); err != nil {
			return err
		}
		if r.schemas == nil {
			r.schemas = map[string]*schema.Version{}
		}
		r.schemas[version] = v
	}
	if v == nil {
		return nil
	}
	cp, err := clone(obj)
	if err != nil {
		return err
	}
	if _, err := v.Coerce(cp, false); err != nil {
		return err
	}
	v.Default(cp)
	if errs := v.Validate(ctx, cp); len(errs) > 0 {
		return errs.ToAggregate()
	}
	return nil
}

type sortedLoss struct {
	Loss
	from, to, object int
}

func (r *run) add(from, to, object int, l Loss) {
	key := fmt.Sprintf("%s|%s|%s|%s|%s|%s", l.Kind, l.From, l.To, l.Object, l.Path, l.Error)
	if r.seen == nil {
		r.seen = map[string]bool{}
	}
	if r.seen[key] {
		return
	}
	r.seen[key] = true
	r.losses = append(r.losses, sortedLoss{Loss: l, from: from, to: to, object: object})
}

func (r *run) fail(ai, bi, i int, name, msg string) {
	r.add(ai, bi, i, Loss{Kind: Failed, From: r.served[ai], To: r.served[bi], Object: name, Error: msg})
}

func (r *run) compare(ai, bi, i int, name string, original, after map[string]any) {
	for _, l := range Compare(original, after, r.opts) {
		l.From, l.To, l.Object = r.served[ai], r.served[bi], name
		r.add(ai, bi, i, l)
	}
}

func (r *run) sorted() []Loss {
	sort.SliceStable(r.losses, func(i, j int) bool {
		x, y := r.losses[i], r.losses[j]
		switch {
		case x.from != y.from:
			return x.from < y.from
		case x.to != y.to:
			return x.to < y.to
		case x.object != y.object:
			return x.object < y.object
		case x.Path != y.Path:
			return x.Path < y.Path
		}
		return x.Kind < y.Kind
	})
	out := make([]Loss, len(r.losses))
	for i, l := range r.losses {
		out[i] = l.Loss
	}
	return out
}

// each calls call with copies of all objs at once and, if that fails, with
// each object alone, to tell which fail. The error is ctx's, once it ends.
func each(ctx context.Context, objs []map[string]any, call func(context.Context, []map[string]any) ([]map[string]any, error)) ([]map[string]any, []error, error) {
	errs := make([]error, len(objs))
	if len(objs) == 0 {
		return nil, errs, nil
	}
	copies, err := cloneAll(objs)
	if err != nil {
		return nil, nil, err
	}
	out, err := call(ctx, copies)
	if err == nil {
		err = checkCount(out, len(objs))
	}
	if err == nil {
		return out, errs, nil
	}
	if ctx.Err() != nil {
		return nil, nil, ctx.Err()
	}
	if len(objs) == 1 {
		errs[0] = err
		return make([]map[string]any, 1), errs, nil
	}
	out = make([]map[string]any, len(objs))
	for i := range objs {
		one, err := call(ctx, copies[i:i+1])
		if err == nil {
			err = checkCount(one, 1)
		}
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		if err != nil {
			errs[i] = err
			continue
		}
		out[i] = one[0]
	}
	return out, errs, nil
}

func checkCount(objs []map[string]any, want int) error {
	if len(objs) != want {
		return fmt.Errorf("%d objects came back for %d", len(objs), want)
	}
	for _, o := range objs {
		if o == nil {
			return errors.New("an object came back empty")
		}
	}
	return nil
}

// clone deep-copies a JSON object, with the types of a decoded one (int64
// for integers, float64 for other numbers).
func clone(obj map[string]any) (map[string]any, error) {
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var out map[string]any
	if err := utiljson.Unmarshal(b, &out); err != nil {
		return nil, err
	}
	return out, nil
}

func cloneAll(objs []map[string]any) ([]map[string]any, error) {
	out := make([]map[string]any, len(objs))
	for i, o := range objs {
		var err error
		if out[i], err = clone(o); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// convert converts decoded objects with conv: encoded, converted, and
// the answer decoded.
func convert(ctx context.Context, conv conversion.Converter, objs []map[string]any, to string) ([]map[string]any, error) {
	in, err := encodeAll(objs)
	if err != nil {
		return nil, err
	}
	res, err := conv.Convert(ctx, in, to)
	if err != nil {
		return nil, err
	}
	return decodeAll(res.Objects, "converted object")
}

func encodeAll(objs []map[string]any) ([][]byte, error) {
	out := make([][]byte, len(objs))
	for i, o := range objs {
		var err error
		if out[i], err = json.Marshal(o); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// decodeAll decodes objects with the types of a decoded one (int64 for
// integers, float64 for other numbers); what names them in an error.
func decodeAll(objs [][]byte, what string) ([]map[string]any, error) {
	out := make([]map[string]any, len(objs))
	for i, b := range objs {
		if err := utiljson.Unmarshal(b, &out[i]); err != nil {
			return nil, fmt.Errorf("%s %d: %w", what, i, err)
		}
	}
	return out, nil
}
