package conversion

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	rulesv1alpha1 "github.com/crdserver/crdserver/internal/apis/conversionrules/v1alpha1"
)

// The compiler of declarative rules: a RuleSet (its types are the API's,
// internal/apis/conversionrules/v1alpha1) checked against the versions it
// converts and made into steps (rulessteps.go), each rule's inverse
// derived where a version does not give its fromHub.

// compileRules checks a RuleSet against the versions it converts and
// compiles it. Errors name the field of the rule set they are about.
func compileRules(rs rulesv1alpha1.RuleSet, versions []string) (*compiled, field.ErrorList) {
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
