package conversion

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	rulesv1alpha1 "github.com/crdserver/crdserver/internal/apis/conversionrules/v1alpha1"
	"github.com/crdserver/crdserver/internal/jsonraw"
)

// step is a compiled rule.
type step interface {
	apply(obj map[string]any) error
	// inverse is the step that undoes it, or nil when there is none.
	inverse() step
}

// compiled is a RuleSet ready to run.
type compiled struct {
	hub     string
	toHub   map[string][]step // by version
	fromHub map[string][]step
}

// CompileRules checks a RuleSet against the versions it converts and
// compiles it. Errors name the field of the rule set they are about.
func CompileRules(rs rulesv1alpha1.RuleSet, versions []string) (*compiled, field.ErrorList) {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	if !contains(versions, rs.Hub) {
		errs = append(errs, field.NotSupported(spec.Child("hub"), rs.Hub, versions))
	}
	c := &compiled{hub: rs.Hub, toHub: map[string][]step{}, fromHub: map[string][]step{}}
	seen := map[string]bool{}
	for i, v := range rs.Versions {
		vp := spec.Child("versions").Index(i)
		switch {
		case v.Name == rs.Hub:
			errs = append(errs, field.Invalid(vp.Child("name"), v.Name, "the hub converts to itself: it has no rules"))
			continue
		case !contains(versions, v.Name):
			errs = append(errs, field.NotSupported(vp.Child("name"), v.Name, versions))
			continue
		case seen[v.Name]:
			errs = append(errs, field.Duplicate(vp.Child("name"), v.Name))
			continue
		}
		seen[v.Name] = true
		to, e := compileSteps(v.ToHub, vp.Child("toHub"))
		errs = append(errs, e...)
		var from []step
		if v.FromHub != nil {
			from, e = compileSteps(v.FromHub, vp.Child("fromHub"))
			errs = append(errs, e...)
		} else {
			for j := len(to) - 1; j >= 0; j-- {
				inv := to[j].inverse()
				if inv == nil {
					errs = append(errs, field.Required(vp.Child("fromHub"), fmt.Sprintf("toHub[%d] has no inverse: give fromHub", j)))
					break
				}
				from = append(from, inv)
			}
		}
		c.toHub[v.Name], c.fromHub[v.Name] = to, from
	}
	for _, v := range versions {
		if v != rs.Hub && !seen[v] {
			errs = append(errs, field.Required(spec.Child("versions"), fmt.Sprintf("version %q has no rules", v)))
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return c, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func compileSteps(rules []rulesv1alpha1.Rule, p *field.Path) ([]step, field.ErrorList) {
	var out []step
	var errs field.ErrorList
	for i, r := range rules {
		s, e := compileRule(r, p.Index(i))
		errs = append(errs, e...)
		if s != nil {
			out = append(out, s)
		}
	}
	return out, errs
}

func compileRule(r rulesv1alpha1.Rule, p *field.Path) (step, field.ErrorList) {
	var set []string
	var s step
	var errs field.ErrorList
	path := func(name, v string) []string {
		fp, err := parsePath(v)
		if err != nil {
			errs = append(errs, field.Invalid(p.Child(name), v, err.Error()))
		}
		return fp
	}
	if r.Rename != nil {
		set = append(set, "rename")
		s = renameStep{from: path("rename.from", r.Rename.From), to: path("rename.to", r.Rename.To)}
	}
	if r.MapValues != nil {
		set = append(set, "mapValues")
		if len(r.MapValues.Values) == 0 {
			errs = append(errs, field.Required(p.Child("mapValues", "values"), ""))
		}
		s = mapStep{path: path("mapValues.path", r.MapValues.Path), values: r.MapValues.Values}
	}
	if r.Split != nil {
		set = append(set, "split")
		st := splitStep{from: path("split.from", r.Split.From), sep: r.Split.Separator}
		for _, t := range r.Split.To {
			st.to = append(st.to, path("split.to", t))
		}
		if len(st.to) < 2 || st.sep == "" {
			errs = append(errs, field.Invalid(p.Child("split"), r.Split, "needs a separator and two or more fields to split into"))
		}
		s = st
	}
	if r.Join != nil {
		set = append(set, "join")
		st := splitStep{from: path("join.to", r.Join.To), sep: r.Join.Separator}
		for _, f := range r.Join.From {
			st.to = append(st.to, path("join.from", f))
		}
		if len(st.to) < 2 || st.sep == "" {
			errs = append(errs, field.Invalid(p.Child("join"), r.Join, "needs a separator and two or more fields to join"))
		}
		s = joinStep{st}
	}
	if r.Wrap != nil {
		set = append(set, "wrap")
		s = wrapStep{path: path("wrap.path", r.Wrap.Path), field: r.Wrap.Field}
		if r.Wrap.Field == "" {
			errs = append(errs, field.Required(p.Child("wrap", "field"), ""))
		}
	}
	if r.Unwrap != nil {
		set = append(set, "unwrap")
		s = unwrapStep{wrapStep{path: path("unwrap.path", r.Unwrap.Path), field: r.Unwrap.Field}}
		if r.Unwrap.Field == "" {
			errs = append(errs, field.Required(p.Child("unwrap", "field"), ""))
		}
	}
	if r.Default != nil {
		set = append(set, "default")
		var v any
		if err := json.Unmarshal(r.Default.Value, &v); err != nil || len(r.Default.Value) == 0 {
			errs = append(errs, field.Invalid(p.Child("default", "value"), string(r.Default.Value), "must be a JSON value"))
		}
		s = defaultStep{path: path("default.path", r.Default.Path), value: v}
	}
	if r.Remove != nil {
		set = append(set, "remove")
		s = removeStep{path: path("remove.path", r.Remove.Path)}
	}
	if r.Annotation != nil {
		set = append(set, "annotation")
		if r.Annotation.Key == "" {
			errs = append(errs, field.Required(p.Child("annotation", "key"), ""))
		}
		s = fromAnnotationStep{path: path("annotation.path", r.Annotation.Path), key: r.Annotation.Key}
	}
	if r.CEL != nil {
		set = append(set, "cel")
		prog, err := compileCEL(r.CEL.Expression)
		if err != nil {
			errs = append(errs, field.Invalid(p.Child("cel", "expression"), r.CEL.Expression, err.Error()))
		}
		s = celStep{path: path("cel.path", r.CEL.Path), prog: prog}
	}
	switch len(set) {
	case 0:
		errs = append(errs, field.Required(p, "one rule: rename, mapValues, split, join, wrap, unwrap, default, remove, annotation or cel"))
	case 1:
	default:
		errs = append(errs, field.Invalid(p, strings.Join(set, ", "), "one rule per entry"))
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return s, nil
}

// parsePath parses ".a.b.c".
func parsePath(p string) ([]string, error) {
	if !strings.HasPrefix(p, ".") || len(p) < 2 {
		return nil, errors.New(`must be a path of fields such as ".spec.host"`)
	}
	parts := strings.Split(p[1:], ".")
	for _, s := range parts {
		if s == "" {
			return nil, errors.New(`must be a path of fields such as ".spec.host"`)
		}
	}
	if parts[0] == "apiVersion" || parts[0] == "kind" || (parts[0] == "metadata" && (len(parts) < 2 || parts[1] != "annotations" && parts[1] != "labels")) {
		return nil, errors.New("may not name apiVersion, kind, or metadata other than labels and annotations")
	}
	return parts, nil
}

// get, set and del read and write a path of nested objects.
func get(obj map[string]any, path []string) (any, bool) {
	var cur any = obj
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[p]; !ok {
			return nil, false
		}
	}
	return cur, true
}

func set(obj map[string]any, path []string, v any) error {
	m := obj
	for i, p := range path[:len(path)-1] {
		next, ok := m[p]
		if !ok || next == nil {
			n := map[string]any{}
			m[p] = n
			m = n
			continue
		}
		if m, ok = next.(map[string]any); !ok {
			return fmt.Errorf(".%s is not an object", strings.Join(path[:i+1], "."))
		}
	}
	m[path[len(path)-1]] = v
	return nil
}

func del(obj map[string]any, path []string) {
	parent, ok := get(obj, path[:len(path)-1])
	if len(path) == 1 {
		parent, ok = obj, true
	}
	if m, isMap := parent.(map[string]any); ok && isMap {
		delete(m, path[len(path)-1])
	}
}

type renameStep struct{ from, to []string }

func (s renameStep) apply(obj map[string]any) error {
	v, ok := get(obj, s.from)
	if !ok {
		return nil
	}
	del(obj, s.from)
	return set(obj, s.to, v)
}

func (s renameStep) inverse() step { return renameStep{from: s.to, to: s.from} }

type mapStep struct {
	path   []string
	values map[string]string
}

func (s mapStep) apply(obj map[string]any) error {
	v, ok := get(obj, s.path)
	str, isStr := v.(string)
	if !ok || !isStr {
		return nil
	}
	if to, ok := s.values[str]; ok {
		return set(obj, s.path, to)
	}
	return nil
}

// inverse maps the images back; of several values with one image, the
// first in sorted order is taken (the round-trip check reports the others
// as lost).
func (s mapStep) inverse() step {
	keys := make([]string, 0, len(s.values))
	for k := range s.values {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	inv := map[string]string{}
	for _, k := range keys {
		if _, taken := inv[s.values[k]]; !taken {
			inv[s.values[k]] = k
		}
	}
	return mapStep{path: s.path, values: inv}
}

type splitStep struct {
	from []string
	to   [][]string
	sep  string
}

func (s splitStep) apply(obj map[string]any) error {
	v, ok := get(obj, s.from)
	str, isStr := v.(string)
	if !ok || !isStr {
		return nil
	}
	del(obj, s.from)
	parts := strings.SplitN(str, s.sep, len(s.to))
	for i, p := range parts {
		if err := set(obj, s.to[i], p); err != nil {
			return err
		}
	}
	return nil
}

func (s splitStep) inverse() step { return joinStep{s} }

// joinStep joins the fields of a splitStep's to into its from.
type joinStep struct{ splitStep }

func (s joinStep) apply(obj map[string]any) error {
	var parts []string
	found := false
	for _, p := range s.to {
		v, ok := get(obj, p)
		if !ok {
			continue
		}
		str, isStr := v.(string)
		if !isStr {
			return fmt.Errorf(".%s is not a string", strings.Join(p, "."))
		}
		parts = append(parts, str)
		found = true
		del(obj, p)
	}
	if !found {
		return nil
	}
	return set(obj, s.from, strings.Join(parts, s.sep))
}

func (s joinStep) inverse() step { return s.splitStep }

type wrapStep struct {
	path  []string
	field string
}

func (s wrapStep) apply(obj map[string]any) error {
	v, ok := get(obj, s.path)
	if !ok {
		return nil
	}
	return set(obj, s.path, map[string]any{s.field: v})
}

func (s wrapStep) inverse() step { return unwrapStep{s} }

type unwrapStep struct{ wrapStep }

func (s unwrapStep) apply(obj map[string]any) error {
	v, ok := get(obj, s.path)
	m, isMap := v.(map[string]any)
	if !ok || !isMap {
		return nil
	}
	inner, ok := m[s.field]
	if !ok {
		del(obj, s.path)
		return nil
	}
	return set(obj, s.path, inner)
}

func (s unwrapStep) inverse() step { return s.wrapStep }

type defaultStep struct {
	path  []string
	value any
}

func (s defaultStep) apply(obj map[string]any) error {
	if _, ok := get(obj, s.path); ok {
		return nil
	}
	return set(obj, s.path, deepCopyJSON(s.value))
}

func (s defaultStep) inverse() step { return removeStep(s) }

type removeStep struct {
	path  []string
	value any
}

func (s removeStep) apply(obj map[string]any) error {
	del(obj, s.path)
	return nil
}

func (s removeStep) inverse() step { return nil }

// fromAnnotationStep restores a field from where toAnnotationStep kept it.
type fromAnnotationStep struct {
	path []string
	key  string
}

func (s fromAnnotationStep) apply(obj map[string]any) error {
	ann, _ := get(obj, []string{"metadata", "annotations"})
	m, _ := ann.(map[string]any)
	raw, ok := m[s.key].(string)
	if !ok {
		return nil
	}
	delete(m, s.key)
	if len(m) == 0 {
		del(obj, []string{"metadata", "annotations"})
	}
	var v any
	if err := json.Unmarshal([]byte(raw), &v); err != nil {
		return fmt.Errorf("annotation %s does not hold a JSON value: %v", s.key, err)
	}
	return set(obj, s.path, v)
}

func (s fromAnnotationStep) inverse() step { return toAnnotationStep(s) }

type toAnnotationStep struct {
	path []string
	key  string
}

func (s toAnnotationStep) apply(obj map[string]any) error {
	v, ok := get(obj, s.path)
	if !ok {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	del(obj, s.path)
	return set(obj, []string{"metadata", "annotations", s.key}, string(b))
}

func (s toAnnotationStep) inverse() step { return fromAnnotationStep(s) }

func deepCopyJSON(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, x := range t {
			out[k] = deepCopyJSON(x)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = deepCopyJSON(x)
		}
		return out
	}
	return v
}

// convert converts one decoded object to version to (of the same group),
// through the hub.
func (c *compiled) convert(obj map[string]any, from, to string) error {
	if from == to {
		return nil
	}
	if from != c.hub {
		for _, s := range c.toHub[from] {
			if err := s.apply(obj); err != nil {
				return err
			}
		}
	}
	if to != c.hub {
		for _, s := range c.fromHub[to] {
			if err := s.apply(obj); err != nil {
				return err
			}
		}
	}
	return nil
}

// decodeNumbers decodes a JSON object keeping numbers exact (json.Number).
func decodeNumbers(raw []byte) (map[string]any, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var obj map[string]any
	if err := d.Decode(&obj); err != nil {
		return nil, err
	}
	return obj, nil
}

// Rules converts a CRD's objects with a compiled RuleSet.
type Rules struct {
	group string
	c     *compiled
}

// NewRules returns the converter of a rule set for the CRD of group with
// the given versions; errors name the rule set's fields.
func NewRules(rs rulesv1alpha1.RuleSet, group string, versions []string) (*Rules, field.ErrorList) {
	c, errs := CompileRules(rs, versions)
	if errs != nil {
		return nil, errs
	}
	return &Rules{group: group, c: c}, nil
}

// ConvertObject converts a decoded object (changed in place) to the
// apiVersion to.
func (r *Rules) ConvertObject(obj map[string]any, to string) error {
	av, _ := obj["apiVersion"].(string)
	if av == to {
		return nil
	}
	fromGroup, fromVersion, _ := strings.Cut(av, "/")
	toGroup, toVersion, _ := strings.Cut(to, "/")
	if fromGroup != r.group || toGroup != r.group {
		return fmt.Errorf("cannot convert %s to %s with the rules of group %s", av, to, r.group)
	}
	if err := r.c.convert(obj, fromVersion, toVersion); err != nil {
		return fmt.Errorf("converting %s to %s: %w", av, to, err)
	}
	obj["apiVersion"] = to
	return nil
}

// Convert implements Converter.
func (r *Rules) Convert(ctx context.Context, objs [][]byte, to string) (Result, error) {
	maps, err := r.convertDecoded(ctx, objs, to)
	if err != nil {
		return Result{}, err
	}
	res := unchanged(objs)
	for i, m := range maps {
		if m == nil {
			continue
		}
		out, err := json.Marshal(m)
		if err != nil {
			return Result{}, err
		}
		if res.Changed == nil {
			res.Objects = append([][]byte(nil), objs...)
			res.Changed = make([]bool, len(objs))
		}
		res.Objects[i], res.Changed[i] = out, true
	}
	return res, nil
}

// convertDecoded converts objs decoded: objects already in to are nil in
// the answer.
func (r *Rules) convertDecoded(_ context.Context, objs [][]byte, to string) ([]map[string]any, error) {
	out := make([]map[string]any, len(objs))
	for i, raw := range objs {
		if av, _, err := jsonraw.String(raw, "apiVersion"); err == nil && av == to {
			continue
		}
		obj, err := decodeObject(raw)
		if err != nil {
			return nil, err
		}
		if av, _ := obj["apiVersion"].(string); av == to {
			continue
		}
		if err := r.ConvertObject(obj, to); err != nil {
			return nil, fmt.Errorf("declarative conversion: %w", err)
		}
		out[i] = obj
	}
	return out, nil
}
