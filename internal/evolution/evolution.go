package evolution

import (
	"context"
	"fmt"
	"sort"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// Finding is one change between two revisions of a CRD that breaks its
// clients or its stored objects.
type Finding struct {
	// Rule is a stable identifier of the kind of change (see the package
	// documentation for the list).
	Rule string `json:"rule"`
	// Version is the CRD version the change concerns ("" for the whole CRD).
	Version string `json:"version"`
	// Path is the field path in an object of that version, such as
	// ".spec.replicas" ("" when the change concerns the version or the CRD).
	Path string `json:"path"`
	// Message says what changed, on one line.
	Message string `json:"message"`
	// Severity is SeverityBreaking for a change that breaks clients or
	// stored objects, SeverityInfo for one worth knowing that does not
	// ("" counts as breaking).
	Severity Severity `json:"severity,omitempty"`
	// Across, for a difference between two versions of the new revision
	// (no conversion webhook), is the version whose objects Version
	// refuses; "" otherwise.
	Across string `json:"across,omitempty"`
}

// Severity is how much a finding matters.
type Severity string

const (
	// SeverityBreaking is a change that breaks clients or stored objects.
	SeverityBreaking Severity = "breaking"
	// SeverityInfo is a change worth knowing that breaks nothing (such
	// as a default added that states what was documented before).
	SeverityInfo Severity = "info"
)

// Breaking reports whether a finding is a break (SeverityInfo is not).
func (f Finding) Breaking() bool { return f.Severity != SeverityInfo }

// Options tune CheckCRD.
type Options struct {
	// ExistingObjects, when not nil, returns the objects that exist in
	// a version (as read in that version). Narrowed constraints and new
	// CEL rules are then reported only when one of them fails them.
	ExistingObjects func(version string) []map[string]any
	// Info also returns the findings of SeverityInfo; without it CheckCRD
	// returns only breaks.
	Info bool
}

// CheckCRD compares an old and a new revision of a CRD and returns what
// the new one breaks, sorted by version, path and rule. Neither CRD is
// changed.
func CheckCRD(ctx context.Context, oldCRD, newCRD *apiextensionsv1.CustomResourceDefinition, opts Options) []Finding {
	if oldCRD == nil || newCRD == nil {
		return nil
	}
	var out []Finding
	out = append(out, checkNames(&oldCRD.Spec, &newCRD.Spec)...)
	out = append(out, checkVersions(&oldCRD.Spec, &newCRD.Spec)...)
	// Without stored objects to validate, constraints that only concern
	// fields new at their place are judged statically (see newfields.go).
	offline := opts.ExistingObjects == nil
	for i := range oldCRD.Spec.Versions {
		ov := &oldCRD.Spec.Versions[i]
		nv := findVersion(&newCRD.Spec, ov.Name)
		if !ov.Served || nv == nil || !nv.Served {
			continue
		}
		w := checkServedVersion(ov, nv, offline)
		if opts.ExistingObjects != nil {
			w.out = filterByObjects(ctx, oldCRD, newCRD, w, opts.ExistingObjects(ov.Name))
		}
		out = append(out, w.out...)
	}
	out = append(out, checkAcrossVersions(ctx, oldCRD, newCRD, out, opts)...)
	kept := out[:0]
	for _, f := range out {
		if f.Severity == "" {
			f.Severity = SeverityBreaking
		}
		if f.Breaking() || opts.Info {
			kept = append(kept, f)
		}
	}
	out = kept
	sortFindings(out)
	return out
}

// FormatText writes findings one a line, as
// "<rule> version=<v> path=<p>: <message>", sorted by version, path and
// rule. The message of a finding of SeverityInfo starts with "info: ".
func FormatText(findings []Finding) string {
	sorted := append([]Finding(nil), findings...)
	sortFindings(sorted)
	var b strings.Builder
	for _, f := range sorted {
		msg := oneLine(f.Message)
		if !f.Breaking() {
			msg = "info: " + msg
		}
		fmt.Fprintf(&b, "%s version=%s path=%s: %s\n", f.Rule, f.Version, f.Path, msg)
	}
	return b.String()
}

func sortFindings(fs []Finding) {
	sort.SliceStable(fs, func(i, j int) bool {
		a, b := fs[i], fs[j]
		if a.Version != b.Version {
			return a.Version < b.Version
		}
		if a.Path != b.Path {
			return a.Path < b.Path
		}
		if a.Rule != b.Rule {
			return a.Rule < b.Rule
		}
		return a.Message < b.Message
	})
}

// oneLine folds runs of white space (new lines included) into one space.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

func findVersion(spec *apiextensionsv1.CustomResourceDefinitionSpec, name string) *apiextensionsv1.CustomResourceDefinitionVersion {
	for i := range spec.Versions {
		if spec.Versions[i].Name == name {
			return &spec.Versions[i]
		}
	}
	return nil
}
