package evolution

import (
	"context"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// Versions that share objects.
//
// Without a conversion webhook (strategy None) an object is stored as it
// was written and read through any served version with only apiVersion
// changed: a client may create it through one version and read and update
// it through another. Where a version refuses what another accepts (a
// bound, an enum, a count, a required field, a CEL rule), an object
// written through the one fails its updates through the other.

// crossRules are the rules of what one version refuses that another
// accepts: the constraints (those existing objects may fail) and types.
func crossRule(rule string) bool {
	_, ok := objectRules[rule]
	return ok || rule == "type-changed"
}

// sharesObjects reports whether a CRD's versions share stored objects as
// they are.
func sharesObjects(spec *apiextensionsv1.CustomResourceDefinitionSpec) bool {
	return spec.Conversion == nil || spec.Conversion.Strategy == "" || spec.Conversion.Strategy == apiextensionsv1.NoneConverter
}

func schemaOf(v *apiextensionsv1.CustomResourceDefinitionVersion) *apiextensionsv1.JSONSchemaProps {
	if v == nil || v.Schema == nil {
		return nil
	}
	return v.Schema.OpenAPIV3Schema
}

// across compares what version a accepts with what version b does, as a
// change from a to b: its findings are b's refusals of a's objects.
func across(a, b *apiextensionsv1.CustomResourceDefinitionVersion, offline bool) *walker {
	w := &walker{version: b.Name, offline: offline}
	as, bs := schemaOf(a), schemaOf(b)
	if as == nil || bs == nil {
		return w
	}
	w.node("", as, bs)
	w.keep(func(f Finding) bool { return crossRule(f.Rule) })
	return w
}

// checkAcrossVersions finds, in a new revision without a conversion
// webhook, what a served version refuses that another served version
// accepts. Differences the old revision already had between the same two
// versions (both served, without a conversion webhook) are left out: they
// are not caused by this change. So is a difference a version's own
// comparison already reports (same, the findings so far). With
// opts.ExistingObjects, a constraint counts only when a stored object
// fails it, as for the version's own changes.
func checkAcrossVersions(ctx context.Context, oldCRD, newCRD *apiextensionsv1.CustomResourceDefinition, same []Finding, opts Options) []Finding {
	if !sharesObjects(&newCRD.Spec) {
		return nil
	}
	reported := map[string]bool{}
	for _, f := range same {
		reported[f.Rule+"\x00"+f.Version+"\x00"+f.Path] = true
	}
	offline := opts.ExistingObjects == nil
	var out []Finding
	vs := newCRD.Spec.Versions
	for i := range vs {
		for j := range vs {
			a, b := &vs[i], &vs[j]
			if i == j || !a.Served || !b.Served {
				continue
			}
			w := across(a, b, offline)
			if len(w.out) == 0 {
				continue
			}
			before := map[string]bool{}
			if oa, ob := findVersion(&oldCRD.Spec, a.Name), findVersion(&oldCRD.Spec, b.Name); sharesObjects(&oldCRD.Spec) &&
				oa != nil && ob != nil && oa.Served && ob.Served {
				for _, f := range across(oa, ob, offline).out {
					before[f.Rule+"\x00"+f.Path] = true
				}
			}
			w.keep(func(f Finding) bool {
				return !before[f.Rule+"\x00"+f.Path] && !reported[f.Rule+"\x00"+f.Version+"\x00"+f.Path]
			})
			if len(w.out) == 0 {
				continue
			}
			if opts.ExistingObjects != nil {
				w.out = filterByObjects(ctx, acceptedBy(newCRD, a, b), newCRD, w, storedObjects(oldCRD, a.Name, b.Name, opts.ExistingObjects))
			}
			for _, f := range w.out {
				f.Across = a.Name
				f.Message = fmt.Sprintf("compared with %s, which shares its objects (no conversion webhook), so an object written through %s fails updates through %s: %s", a.Name, a.Name, b.Name, f.Message)
				out = append(out, f)
			}
		}
	}
	return out
}

// acceptedBy is crd with version b's schema replaced by version a's: what
// objects of b were allowed to be, for filterByObjects.
func acceptedBy(crd *apiextensionsv1.CustomResourceDefinition, a, b *apiextensionsv1.CustomResourceDefinitionVersion) *apiextensionsv1.CustomResourceDefinition {
	c := crd.DeepCopy()
	v := findVersion(&c.Spec, b.Name)
	v.Schema = a.Schema.DeepCopy()
	return c
}

// storedObjects returns the stored objects as the old revision reads
// them: through b, else a, else any served version (without a conversion
// webhook they are the same objects whatever the version).
func storedObjects(oldCRD *apiextensionsv1.CustomResourceDefinition, a, b string, existing func(string) []map[string]any) []map[string]any {
	names := []string{b, a}
	for _, v := range oldCRD.Spec.Versions {
		names = append(names, v.Name)
	}
	for _, name := range names {
		if v := findVersion(&oldCRD.Spec, name); v != nil && v.Served {
			return existing(name)
		}
	}
	return nil
}
