package evolution

import (
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/version"
)

// stability is how stable a version is by its name, as Kubernetes orders
// versions: vN is GA, vNbetaM beta, vNalphaM alpha, any other name less.
type stability int

const (
	belowAlpha stability = iota
	alpha
	beta
	ga
)

var kubeLikeVersion = regexp.MustCompile(`^v[0-9]+(?:(alpha|beta)[0-9]+)?$`)

func stabilityOf(v string) stability {
	m := kubeLikeVersion.FindStringSubmatch(v)
	if m == nil {
		return belowAlpha
	}
	switch m[1] {
	case "alpha":
		return alpha
	case "beta":
		return beta
	}
	return ga
}

func (s stability) String() string {
	switch s {
	case ga:
		return "GA"
	case beta:
		return "beta"
	case alpha:
		return "alpha"
	}
	return "below alpha"
}

// checkNames compares what names the resource: scope, group and names.
func checkNames(o, n *apiextensionsv1.CustomResourceDefinitionSpec) []Finding {
	var out []Finding
	add := func(rule, format string, args ...any) {
		out = append(out, Finding{Rule: rule, Message: fmt.Sprintf(format, args...)})
	}
	if o.Scope != n.Scope {
		add("scope-changed", "scope changed from %s to %s: every object's URL changes", o.Scope, n.Scope)
	}
	if o.Group != n.Group {
		add("group-changed", "group changed from %q to %q", o.Group, n.Group)
	}
	if o.Names.Plural != n.Names.Plural {
		add("plural-changed", "resource renamed from %q to %q", o.Names.Plural, n.Names.Plural)
	}
	if o.Names.Kind != n.Names.Kind {
		add("kind-changed", "kind changed from %q to %q", o.Names.Kind, n.Names.Kind)
	}
	if ol, nl := listKind(o.Names), listKind(n.Names); ol != nl {
		add("listkind-changed", "list kind changed from %q to %q", ol, nl)
	}
	if os, ns := singular(o.Names), singular(n.Names); os != ns {
		add("singular-changed", "singular name changed from %q to %q", os, ns)
	}
	for _, s := range o.Names.ShortNames {
		if !slices.Contains(n.Names.ShortNames, s) {
			add("shortname-removed", "short name %q removed", s)
		}
	}
	for _, c := range o.Names.Categories {
		if !slices.Contains(n.Names.Categories, c) {
			add("category-removed", "category %q removed", c)
		}
	}
	return out
}

func listKind(n apiextensionsv1.CustomResourceDefinitionNames) string {
	if n.ListKind == "" && n.Kind != "" {
		return n.Kind + "List"
	}
	return n.ListKind
}

func singular(n apiextensionsv1.CustomResourceDefinitionNames) string {
	if n.Singular == "" {
		return strings.ToLower(n.Kind)
	}
	return n.Singular
}

// checkVersions applies the deprecation policy to the versions' served,
// deprecated and storage flags.
func checkVersions(o, n *apiextensionsv1.CustomResourceDefinitionSpec) []Finding {
	var out []Finding
	add := func(rule, v, format string, args ...any) {
		out = append(out, Finding{Rule: rule, Version: v, Message: fmt.Sprintf(format, args...)})
	}
	for i := range o.Versions {
		ov := &o.Versions[i]
		nv := findVersion(n, ov.Name)
		switch {
		case !ov.Served || ov.Deprecated:
		case nv == nil:
			add("served-version-removed", ov.Name, "served version %s was removed without being deprecated first", ov.Name)
		case !nv.Served:
			add("version-unserved-without-deprecation", ov.Name, "version %s is no longer served but was not deprecated first", ov.Name)
		}
	}
	// Rule 3: deprecate a served version only in favour of one as stable.
	// Deprecating every served version at once retires the API rather
	// than moves it to a less stable version; so does a deprecation whose
	// warning names a replacement in another API group.
	allDeprecated := !slices.ContainsFunc(n.Versions, func(v apiextensionsv1.CustomResourceDefinitionVersion) bool {
		return v.Served && !v.Deprecated
	})
	for i := range n.Versions {
		nv := &n.Versions[i]
		ov := findVersion(o, nv.Name)
		if !nv.Deprecated || !nv.Served || ov == nil || ov.Deprecated || allDeprecated {
			continue
		}
		if otherGroupNamed(deref(nv.DeprecationWarning), n.Group) != "" {
			continue
		}
		level := stabilityOf(nv.Name)
		var others []string
		replaced := false
		for _, x := range byPriority(n.Versions) {
			if x.Name == nv.Name || !x.Served || x.Deprecated {
				continue
			}
			if stabilityOf(x.Name) >= level {
				replaced = true
				break
			}
			others = append(others, fmt.Sprintf("%s (%s)", x.Name, stabilityOf(x.Name)))
		}
		if replaced {
			continue
		}
		left := "no other served, non-deprecated version is left"
		if len(others) > 0 {
			left = "the others served and not deprecated are less stable: " + strings.Join(others, ", ")
		}
		add("deprecated-for-less-stable", nv.Name, "%s (%s) is newly deprecated, but %s", nv.Name, level, left)
	}
	// The storage version.
	os, ns := storageVersion(o), storageVersion(n)
	if os != "" && ns != "" && os != ns {
		if stabilityOf(ns) < stabilityOf(os) && !sameStoredShape(o, n, os, ns) {
			add("storage-moved-to-less-stable", ns, "storage version moved from %s (%s) to the less stable %s (%s)", os, stabilityOf(os), ns, stabilityOf(ns))
		}
		if ov := findVersion(o, ns); ov == nil || !ov.Served {
			add("storage-moved-to-new-version", ns, "storage version moved from %s to %s, which the old revision did not serve: add and serve a version before storing in it", os, ns)
		}
	}
	return out
}

// sameStoredShape reports whether moving the storage version from os to
// ns leaves the stored objects as they were: ns was served by the old
// revision, with the schema the old storage version had, and keeps it. It
// is how a project takes back a storage move made too early.
func sameStoredShape(o, n *apiextensionsv1.CustomResourceDefinitionSpec, os, ns string) bool {
	oldStorage, oldTarget, newTarget := findVersion(o, os), findVersion(o, ns), findVersion(n, ns)
	if oldStorage == nil || oldTarget == nil || newTarget == nil || !oldTarget.Served {
		return false
	}
	s := func(v *apiextensionsv1.CustomResourceDefinitionVersion) any {
		if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			return nil
		}
		return canonical(v.Schema.OpenAPIV3Schema)
	}
	want := s(oldStorage)
	return reflect.DeepEqual(want, s(oldTarget)) && reflect.DeepEqual(want, s(newTarget))
}

// groupVersionRef is an API group and version as a text names them
// ("gateway.networking.k8s.io/v1"): a group has at least one dot.
var groupVersionRef = regexp.MustCompile(`(?:^|[^A-Za-z0-9./:-])((?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)+[a-z]{2,})/(v[0-9]+(?:(?:alpha|beta)[0-9]+)?)\b`)

// otherGroupNamed returns the first API group other than group that a
// deprecation warning names with a version, "" if none.
func otherGroupNamed(warning, group string) string {
	for _, m := range groupVersionRef.FindAllStringSubmatch(warning, -1) {
		if m[1] != group {
			return m[1]
		}
	}
	return ""
}

func storageVersion(spec *apiextensionsv1.CustomResourceDefinitionSpec) string {
	for _, v := range spec.Versions {
		if v.Storage {
			return v.Name
		}
	}
	return ""
}

// byPriority returns the versions, the most preferred first, in
// Kubernetes' version order.
func byPriority(vs []apiextensionsv1.CustomResourceDefinitionVersion) []apiextensionsv1.CustomResourceDefinitionVersion {
	out := append([]apiextensionsv1.CustomResourceDefinitionVersion(nil), vs...)
	sort.SliceStable(out, func(i, j int) bool {
		return version.CompareKubeAwareVersionStrings(out[i].Name, out[j].Name) > 0
	})
	return out
}

// checkServedVersion compares a version served before and after: its
// schema, subresources and selectable fields.
// offline: no stored objects are at hand (see walker.offline).
func checkServedVersion(ov, nv *apiextensionsv1.CustomResourceDefinitionVersion, offline bool) *walker {
	w := &walker{version: ov.Name, offline: offline}
	if ov.Schema != nil && ov.Schema.OpenAPIV3Schema != nil && nv.Schema != nil && nv.Schema.OpenAPIV3Schema != nil {
		w.node("", ov.Schema.OpenAPIV3Schema, nv.Schema.OpenAPIV3Schema)
	}
	add := func(rule, path, format string, args ...any) {
		w.out = append(w.out, Finding{Rule: rule, Version: ov.Name, Path: path, Message: fmt.Sprintf(format, args...)})
	}
	if os := ov.Subresources; os != nil {
		ns := nv.Subresources
		if os.Status != nil && (ns == nil || ns.Status == nil) {
			add("subresource-removed", "", "the status subresource was removed")
		}
		if os.Scale != nil {
			switch {
			case ns == nil || ns.Scale == nil:
				add("subresource-removed", "", "the scale subresource was removed")
			case os.Scale.SpecReplicasPath != ns.Scale.SpecReplicasPath || os.Scale.StatusReplicasPath != ns.Scale.StatusReplicasPath || deref(os.Scale.LabelSelectorPath) != deref(ns.Scale.LabelSelectorPath):
				add("scale-paths-changed", "", "the scale subresource's paths changed from %s to %s", scalePaths(os.Scale), scalePaths(ns.Scale))
			}
		}
	}
	for _, f := range ov.SelectableFields {
		if !slices.ContainsFunc(nv.SelectableFields, func(g apiextensionsv1.SelectableField) bool { return g.JSONPath == f.JSONPath }) {
			add("selectable-field-removed", f.JSONPath, "selectable field %s was removed: field selectors on it fail", f.JSONPath)
		}
	}
	return w
}

func scalePaths(s *apiextensionsv1.CustomResourceSubresourceScale) string {
	return fmt.Sprintf("spec %s, status %s, selector %s", s.SpecReplicasPath, s.StatusReplicasPath, orNone(deref(s.LabelSelectorPath)))
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
