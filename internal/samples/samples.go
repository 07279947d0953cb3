package samples

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strings"

	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/crdserver/crdserver/internal/schema"
)

// maxAttempts bounds the objects made for one sample before it is dropped.
const maxAttempts = 50

// Generate makes n valid objects of version of crd, the same ones for the
// same seed (see the package comment). It fails when the version has no
// structural schema or when not one object could be made valid; objects
// that stay invalid after 50 tries are dropped, so it may return fewer
// than n.
func Generate(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, version string, n int, seed int64) ([]map[string]any, error) {
	if n < 0 {
		return nil, fmt.Errorf("a negative number of samples: %d", n)
	}
	root, err := Structural(crd, version)
	if err != nil {
		return nil, err
	}
	compiled, err := schema.Compile(crd, version)
	if err != nil {
		return nil, err
	}
	if compiled == nil {
		return nil, fmt.Errorf("CRD %s has no schema for version %s", crd.Name, version)
	}
	g := newGenerator(seed)
	apiVersion := crd.Spec.Group + "/" + version
	kind := crd.Spec.Names.Kind
	prefix := strings.ToLower(kind) + "-" + version
	namespaced := crd.Spec.Scope != apiextensionsv1.ClusterScoped
	out := make([]map[string]any, 0, n)
	var lastErr error
	for range n {
		name := fmt.Sprintf("%s-%03d", prefix, len(out))
		obj, err := g.valid(ctx, compiled, root, func() (map[string]any, bool) {
			return g.object(root, apiVersion, kind, name, namespaced)
		})
		if err != nil {
			lastErr = err
			continue
		}
		out = append(out, obj)
	}
	if n > 0 && len(out) == 0 {
		return nil, fmt.Errorf("no valid %s object of CRD %s in %d tries; the last: %v", version, crd.Name, maxAttempts*n, lastErr)
	}
	return out, nil
}

// valid makes objects with build until one is valid (nil and the last
// reason after maxAttempts). An invalid object is first repaired where
// validation found it wrong, a few times, before another one is made.
func (g *generator) valid(ctx context.Context, v *schema.Version, root *structuralschema.Structural, build func() (map[string]any, bool)) (map[string]any, error) {
	var lastErr error
	for range maxAttempts {
		obj, ok := build()
		if !ok {
			lastErr = errors.New("a required value could not be made")
			continue
		}
		for round := 0; ; round++ {
			errs, err := problems(ctx, v, obj)
			if err != nil {
				lastErr = err
				break
			}
			if len(errs) == 0 {
				return obj, nil
			}
			lastErr = errs.ToAggregate()
			if round == maxRepairs || !g.repair(root, obj, errs) {
				break
			}
		}
	}
	return nil, lastErr
}

// Structural returns the structural schema of version of crd.
func Structural(crd *apiextensionsv1.CustomResourceDefinition, version string) (*structuralschema.Structural, error) {
	val, err := apihelpers.GetSchemaForVersion(crd, version)
	if err != nil {
		return nil, err
	}
	if val == nil || val.OpenAPIV3Schema == nil {
		return nil, fmt.Errorf("CRD %s has no schema for version %s", crd.Name, version)
	}
	internal := &apiextensions.CustomResourceValidation{}
	if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(val, internal, nil); err != nil {
		return nil, fmt.Errorf("converting the schema of %s: %w", version, err)
	}
	s, err := structuralschema.NewStructural(internal.OpenAPIV3Schema)
	if err != nil {
		return nil, fmt.Errorf("the schema of %s is not structural: %w", version, err)
	}
	return s, nil
}

// Check reports whether obj is valid as crdserver takes it on a create:
// a copy is pruned (nothing may be unknown), defaulted and validated.
func Check(ctx context.Context, v *schema.Version, obj map[string]any) error {
	errs, err := problems(ctx, v, obj)
	if err != nil {
		return err
	}
	return errs.ToAggregate()
}

// problems are the validation errors of obj (see Check); the error is for
// an object that cannot even be validated (unknown fields).
func problems(ctx context.Context, v *schema.Version, obj map[string]any) (field.ErrorList, error) {
	cp := runtime.DeepCopyJSON(obj)
	unknown, err := v.Coerce(cp, true)
	if err != nil {
		return nil, err
	}
	if len(unknown) > 0 {
		return nil, fmt.Errorf("unknown fields %s", strings.Join(unknown, ", "))
	}
	v.Default(cp)
	return v.Validate(ctx, cp), nil
}

// generator makes values from schemas with one random source.
type generator struct {
	rng      *rand.Rand
	patterns map[string]*compiledPattern
}

func newGenerator(seed int64) *generator {
	return &generator{
		rng:      rand.New(rand.NewPCG(uint64(seed), 0x73616d706c6573)), // "samples"
		patterns: map[string]*compiledPattern{},
	}
}

func (g *generator) chance(p float64) bool { return g.rng.Float64() < p }

func pick[T any](g *generator, xs []T) T { return xs[g.rng.IntN(len(xs))] }

var noValidation = &structuralschema.ValueValidation{}

func valueValidation(s *structuralschema.Structural) *structuralschema.ValueValidation {
	if s.ValueValidation == nil {
		return noValidation
	}
	return s.ValueValidation
}

// object makes one top-level object.
func (g *generator) object(root *structuralschema.Structural, apiVersion, kind, name string, namespaced bool) (map[string]any, bool) {
	m, ok := g.properties(root, 0, typeMeta)
	if !ok {
		return nil, false
	}
	m["apiVersion"] = apiVersion
	m["kind"] = kind
	md := map[string]any{"name": name}
	if namespaced {
		md["namespace"] = "default"
	}
	m["metadata"] = md
	return m, true
}

// typeMeta are the properties of an object (top-level or embedded) that
// the generator sets itself.
var typeMeta = map[string]bool{"apiVersion": true, "kind": true, "metadata": true}

// value makes a value of schema s at depth (the root's properties are at
// depth 1); false when none could be made.
func (g *generator) value(s *structuralschema.Structural, depth int) (any, bool) {
	vv := valueValidation(s)
	if s.Nullable && g.chance(0.08) && enumAllows(vv.Enum, nil) {
		return nil, true
	}
	if len(vv.Enum) > 0 {
		return normalize(pick(g, vv.Enum).Object), true
	}
	if s.XEmbeddedResource {
		return g.embedded(s, depth)
	}
	if s.XIntOrString {
		return g.intOrString(s)
	}
	switch s.Type {
	case "object":
		switch {
		case len(s.Properties) > 0:
			return g.properties(s, depth, nil)
		case s.AdditionalProperties != nil && s.AdditionalProperties.Structural != nil:
			return g.mapValue(s, depth)
		}
		return map[string]any{}, true
	case "array":
		return g.array(s, depth)
	case "string":
		return g.str(s)
	case "integer":
		return g.integer(s)
	case "number":
		return g.number(s)
	case "boolean":
		return g.rng.IntN(2) == 0, true
	case "":
		// x-kubernetes-preserve-unknown-fields without a type: anything;
		// left empty.
		return map[string]any{}, true
	}
	return nil, false
}

func enumAllows(enum []structuralschema.JSON, v any) bool {
	if len(enum) == 0 {
		return true
	}
	for _, e := range enum {
		if e.Object == v {
			return true
		}
	}
	return false
}

// normalize gives a JSON value (an enum member, a default) the types of
// a decoded object: int64 for integers, float64 for other numbers.
func normalize(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return v
	}
	var out any
	if err := utiljson.Unmarshal(b, &out); err != nil {
		return v
	}
	return out
}

// optional is the chance that an optional property is present.
func optional(depth int) float64 {
	switch {
	case depth <= 2:
		return 0.6
	case depth <= 4:
		return 0.4
	}
	return 0.2
}

// spread is how many items or keys beyond the minimum a list or map may
// get at depth.
func spread(depth int) int {
	switch {
	case depth <= 2:
		return 4
	case depth <= 4:
		return 2
	}
	return 1
}

// properties makes an object of the declared properties of s, leaving out
// those in skip.
func (g *generator) properties(s *structuralschema.Structural, depth int, skip map[string]bool) (map[string]any, bool) {
	vv := valueValidation(s)
	must := map[string]bool{}
	for _, r := range vv.Required {
		must[r] = true
	}
	// anyOf and oneOf branches that require properties: one branch's are
	// present, and for oneOf those only the other branches require are
	// left out (the final validation sorts out the rest).
	avoid := map[string]bool{}
	for j, junctor := range [][]structuralschema.NestedValueValidation{vv.AnyOf, vv.OneOf} {
		var branches [][]string
		for _, b := range junctor {
			if len(b.Required) > 0 {
				branches = append(branches, b.Required)
			}
		}
		if len(branches) == 0 {
			continue
		}
		chosen := g.rng.IntN(len(branches))
		for _, r := range branches[chosen] {
			must[r] = true
		}
		if oneOf := j == 1; oneOf {
			for i, b := range branches {
				for _, r := range b {
					if i != chosen && !must[r] {
						avoid[r] = true
					}
				}
			}
		}
	}
	names := make([]string, 0, len(s.Properties))
	for name := range s.Properties {
		names = append(names, name)
	}
	sort.Strings(names)
	m := map[string]any{}
	for _, name := range names {
		if skip[name] || avoid[name] {
			continue
		}
		p := s.Properties[name]
		defaulted := p.Default.Object != nil
		var present bool
		switch {
		case defaulted && g.chance(0.35):
			// Left out: the default applies.
		case must[name]:
			present = true
		default:
			present = g.chance(optional(depth + 1))
		}
		if !present {
			continue
		}
		v, ok := g.value(&p, depth+1)
		if !ok {
			if must[name] && !defaulted {
				return nil, false
			}
			continue
		}
		m[name] = v
	}
	return m, true
}

// mapKeys are keys a map may get (besides random ones).
var mapKeys = []string{"a", "b", "key-1", "007", "0", "x.y", "Ünï", "UPPER", "with space", "example.com/name", "日本"}

// mapValue makes a map of additionalProperties.
func (g *generator) mapValue(s *structuralschema.Structural, depth int) (map[string]any, bool) {
	vv := valueValidation(s)
	lo, hi := 0, -1
	if vv.MinProperties != nil {
		lo = int(*vv.MinProperties)
	}
	if vv.MaxProperties != nil {
		hi = int(*vv.MaxProperties)
	}
	count, ok := g.size(lo, hi, depth)
	if !ok {
		return nil, false
	}
	values := s.AdditionalProperties.Structural
	m := map[string]any{}
	for tries := 0; len(m) < count && tries < 10*count+10; tries++ {
		var k string
		if g.chance(0.7) {
			k = pick(g, mapKeys)
		} else {
			k = fmt.Sprintf("k%d", g.rng.IntN(1000))
		}
		if _, dup := m[k]; dup {
			continue
		}
		v, ok := g.value(values, depth+1)
		if !ok {
			continue
		}
		m[k] = v
	}
	if len(m) < lo {
		return nil, false
	}
	return m, true
}

// size picks how many items or keys to make between lo and hi (hi < 0:
// no maximum).
func (g *generator) size(lo, hi, depth int) (int, bool) {
	if hi >= 0 && hi < lo {
		return 0, false
	}
	top := lo + spread(depth)
	if hi >= 0 && hi < top {
		top = hi
	}
	return lo + g.rng.IntN(top-lo+1), true
}

// array makes a list, its items distinct for uniqueItems and the set and
// map list types.
func (g *generator) array(s *structuralschema.Structural, depth int) ([]any, bool) {
	vv := valueValidation(s)
	if s.Items == nil {
		return []any{}, true
	}
	lo, hi := 0, -1
	if vv.MinItems != nil {
		lo = int(*vv.MinItems)
	}
	if vv.MaxItems != nil {
		hi = int(*vv.MaxItems)
	}
	count, ok := g.size(lo, hi, depth)
	if !ok {
		return nil, false
	}
	var key func(any) string
	switch {
	case s.XListType != nil && *s.XListType == "map":
		key = mapListKey(s.Items, s.XListMapKeys)
	case vv.UniqueItems || s.XListType != nil && *s.XListType == "set":
		key = func(v any) string { b, _ := json.Marshal(v); return string(b) }
	}
	out := make([]any, 0, count)
	seen := map[string]bool{}
	for tries := 0; len(out) < count && tries < 10*count+10; tries++ {
		v, ok := g.value(s.Items, depth+1)
		if !ok {
			continue
		}
		if key != nil {
			k := key(v)
			if seen[k] {
				continue
			}
			seen[k] = true
		}
		out = append(out, v)
	}
	if len(out) < lo {
		return nil, false
	}
	return out, true
}

// mapListKey identifies an item of a map list by its keys, taking the
// default of a key left out.
func mapListKey(items *structuralschema.Structural, keys []string) func(any) string {
	return func(v any) string {
		m, _ := v.(map[string]any)
		tuple := make([]any, len(keys))
		for i, k := range keys {
			x, ok := m[k]
			if !ok {
				if p, ok := items.Properties[k]; ok && p.Default.Object != nil {
					x = normalize(p.Default.Object)
				}
			}
			tuple[i] = x
		}
		b, _ := json.Marshal(tuple)
		return string(b)
	}
}

// embeddedKinds are the apiVersion and kind pairs of embedded resources
// whose schema does not constrain them.
var embeddedKinds = [][2]string{{"v1", "ConfigMap"}, {"example.com/v1", "Widget"}, {"apps/v1", "Deployment"}}

// embedded makes an x-kubernetes-embedded-resource: apiVersion, kind,
// metadata.name and the declared properties.
func (g *generator) embedded(s *structuralschema.Structural, depth int) (map[string]any, bool) {
	m, ok := g.properties(s, depth, typeMeta)
	if !ok {
		return nil, false
	}
	gvk := pick(g, embeddedKinds)
	for i, f := range []string{"apiVersion", "kind"} {
		m[f] = gvk[i]
		if p, ok := s.Properties[f]; ok && p.Type == "string" && (len(valueValidation(&p).Enum) > 0 || valueValidation(&p).Pattern != "") {
			v, ok := g.value(&p, depth+1)
			if !ok {
				return nil, false
			}
			m[f] = v
		}
	}
	md := map[string]any{"name": fmt.Sprintf("embedded-%d", g.rng.IntN(1000))}
	if g.chance(0.3) {
		md["labels"] = map[string]any{"app": pick(g, []string{"demo", "007", "x.y"})}
	}
	m["metadata"] = md
	return m, true
}

// intOrString makes an integer or a string for x-kubernetes-int-or-string.
func (g *generator) intOrString(s *structuralschema.Structural) (any, bool) {
	vv := valueValidation(s)
	if g.chance(0.5) {
		if vv.Minimum != nil || vv.Maximum != nil || vv.MultipleOf != nil {
			return g.integer(s)
		}
		return pick(g, []int64{0, 1, 7, 25, 80, 8080, int64(g.rng.IntN(100))}), true
	}
	if vv.Pattern != "" || vv.Format != "" || vv.MinLength != nil || vv.MaxLength != nil {
		return g.str(s)
	}
	return pick(g, []string{"50%", "007", "0", "10", "http", "25%", "1e3", ""}), true
}

// integer makes an int64 within minimum, maximum (exclusive too),
// multipleOf and the int32 range of format int32.
func (g *generator) integer(s *structuralschema.Structural) (any, bool) {
	vv := valueValidation(s)
	lo, hi := int64(math.MinInt64), int64(math.MaxInt64)
	if vv.Format == "int32" {
		lo, hi = math.MinInt32, math.MaxInt32
	}
	if vv.Minimum != nil {
		m := *vv.Minimum
		c := math.Ceil(m)
		if vv.ExclusiveMinimum && c == m {
			c++
		}
		if c > float64(lo) {
			if c >= float64(math.MaxInt64) {
				return nil, false
			}
			lo = int64(c)
		}
	}
	if vv.Maximum != nil {
		m := *vv.Maximum
		f := math.Floor(m)
		if vv.ExclusiveMaximum && f == m {
			f--
		}
		if f < float64(hi) {
			if f <= float64(math.MinInt64) {
				return nil, false
			}
			hi = int64(f)
		}
	}
	if lo > hi {
		return nil, false
	}
	step := int64(1)
	if vv.MultipleOf != nil && *vv.MultipleOf >= 1 && *vv.MultipleOf == math.Trunc(*vv.MultipleOf) && *vv.MultipleOf < 1<<53 {
		step = int64(*vv.MultipleOf)
	}
	candidates := []int64{0, 1, -1, 7, 42, 100, 255, 1000, 65535, math.MaxInt32, math.MinInt32}
	if vv.Format != "int32" {
		candidates = append(candidates, 1<<32, -(1 << 32))
	}
	if vv.Format == "int64" {
		candidates = append(candidates, 1<<53+1, -(1<<53 + 1), math.MaxInt64)
	}
	var fit []int64
	for _, c := range candidates {
		if c >= lo && c <= hi && c%step == 0 {
			fit = append(fit, c)
		}
	}
	if len(fit) > 0 && g.chance(0.5) {
		return pick(g, fit), true
	}
	// A multiple of step in [lo, hi], near 0 or near a bound.
	klo, khi := ceilDiv(lo, step), floorDiv(hi, step)
	if klo > khi {
		return nil, false
	}
	const window = 1000
	switch {
	case klo <= 0 && khi >= 0:
		klo, khi = max(klo, -window), min(khi, window)
	case g.chance(0.5):
		khi = klo + min(khi-klo, window)
	default:
		klo = khi - min(khi-klo, window)
	}
	return (klo + g.rng.Int64N(khi-klo+1)) * step, true
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

func ceilDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) == (b < 0) {
		q++
	}
	return q
}

// number makes a float64 within minimum, maximum (exclusive too) and
// multipleOf.
func (g *generator) number(s *structuralschema.Structural) (any, bool) {
	vv := valueValidation(s)
	lo, hi := -1e6, 1e6
	if vv.Minimum != nil {
		lo = *vv.Minimum
		if vv.Maximum == nil {
			hi = lo + 1e6
		}
	}
	if vv.Maximum != nil {
		hi = *vv.Maximum
		if vv.Minimum == nil {
			lo = hi - 1e6
		}
	}
	in := func(v float64) bool {
		if v < lo || v > hi {
			return false
		}
		if vv.Minimum != nil && vv.ExclusiveMinimum && v == *vv.Minimum {
			return false
		}
		if vv.Maximum != nil && vv.ExclusiveMaximum && v == *vv.Maximum {
			return false
		}
		return true
	}
	if vv.MultipleOf != nil && *vv.MultipleOf > 0 {
		m := *vv.MultipleOf
		klo, khi := math.Ceil(lo/m), math.Floor(hi/m)
		if klo > khi {
			return nil, false
		}
		if khi-klo > 1000 {
			if klo <= 0 && khi >= 0 {
				klo, khi = max(klo, -500), min(khi, 500)
			} else {
				khi = klo + 1000
			}
		}
		for range 10 {
			v := (klo + float64(g.rng.Int64N(int64(khi-klo)+1))) * m
			if in(v) {
				return v, true
			}
		}
		return nil, false
	}
	candidates := []float64{0, 0.5, -1.25, 0.1, 0.30000000000000004, math.Pi, 1e-7, 2, 123456.789, -0.001}
	var fit []float64
	for _, c := range candidates {
		if in(c) {
			fit = append(fit, c)
		}
	}
	if len(fit) > 0 && g.chance(0.5) {
		return pick(g, fit), true
	}
	for range 10 {
		v := lo + g.rng.Float64()*(hi-lo)
		if in(v) {
			return v, true
		}
	}
	if in(lo) {
		return lo, true
	}
	return nil, false
}
