package conversionrules

import (
	"context"
	"fmt"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/crdserver/crdserver/internal/apis/conversionrules/v1alpha1"
	"github.com/crdserver/crdserver/internal/conversion"
	"github.com/crdserver/crdserver/internal/evolution"
	"github.com/crdserver/crdserver/internal/roundtrip"
	"github.com/crdserver/crdserver/internal/samples"
	"github.com/crdserver/crdserver/internal/store"
)

// Samples is how many sample objects of each served version Prove
// converts; the seed is fixed, so a rule set is judged the same way every
// time.
const (
	Samples    = 20
	sampleSeed = 1
	// maxCauses bounds the causes of a refusal: one per lost path and
	// round trip, the first objects that show it.
	maxCauses = 20
)

// Losses converts sample objects of each served version of crd (made
// from its schema) to every other served version and back with rules, in
// process and through the target versions' schemas as the server
// converts, and returns what the round trips lose or change, and the
// conversions that fail.
func Losses(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, rules *conversion.Rules) ([]roundtrip.Loss, error) {
	conv, err := roundtrip.NewRules(crd, rules)
	if err != nil {
		return nil, fmt.Errorf("the schemas of CRD %s: %w", crd.Name, err)
	}
	objs := map[string][]map[string]any{}
	for _, v := range roundtrip.ServedVersions(crd) {
		s, err := samples.Generate(ctx, crd, v, Samples, sampleSeed)
		if err != nil {
			// A version whose schema gives no samples cannot be proven
			// here; say so rather than accept the rules unproven.
			return nil, fmt.Errorf("no sample objects of version %s to prove the rules with: %w", v, err)
		}
		objs[v] = s
	}
	return roundtrip.RoundTrip(ctx, crd, conv, objs)
}

// Prove returns one error per round trip and field path that the rules
// lose or change a value of, or per round trip that fails, on the sample
// objects of Losses (nil: the rules lose nothing).
func Prove(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, rules *conversion.Rules) field.ErrorList {
	specPath := field.NewPath("spec")
	losses, err := Losses(ctx, crd, rules)
	if err != nil {
		return field.ErrorList{field.Invalid(specPath, crd.Name, err.Error())}
	}
	var errs field.ErrorList
	for _, l := range distinct(losses) {
		errs = append(errs, field.Invalid(specPath, l.From+"→"+l.To+"→"+l.From, lossText(l)))
	}
	return errs
}

// distinct keeps the first loss of each round trip, kind and path (the
// first failure of each round trip), at most maxCauses of them.
func distinct(losses []roundtrip.Loss) []roundtrip.Loss {
	var out []roundtrip.Loss
	seen := map[string]bool{}
	for _, l := range losses {
		key := l.From + " " + l.To + " " + string(l.Kind) + " " + l.Path
		if l.Kind == roundtrip.Failed {
			key = l.From + " " + l.To + " failed"
		}
		if seen[key] {
			continue
		}
		seen[key] = true
		if len(out) == maxCauses {
			break
		}
		out = append(out, l)
	}
	return out
}

func lossText(l roundtrip.Loss) string {
	switch l.Kind {
	case roundtrip.Failed:
		return fmt.Sprintf("conversion failed for sample %s: %s", l.Object, l.Error)
	case roundtrip.Lost:
		return fmt.Sprintf("lost %s (sample %s: %s came back absent); keep a field that has no counterpart in an annotation of the other version (rule annotation)", l.Path, l.Object, l.Original)
	default:
		return fmt.Sprintf("changed %s (sample %s: %s came back as %s)", l.Path, l.Object, orAbsent(l.Original), orAbsent(l.After))
	}
}

// Findings are what a CRD change does to the CRD's conversion rules, as
// findings of its compatibility check: rules that no longer fit the CRD's
// versions (rule conversion-rules-invalid), and each field of a version
// that another version cannot hold under the rules (conversion-loses-field,
// naming the version that cannot hold it) or a conversion that fails
// (conversion-fails).
func Findings(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, spec v1alpha1.RuleSet) []evolution.Finding {
	var versions []string
	for _, v := range crd.Spec.Versions {
		versions = append(versions, v.Name)
	}
	rules, errs := conversion.NewRules(spec, crd.Spec.Group, versions)
	if errs != nil {
		return []evolution.Finding{{Rule: "conversion-rules-invalid",
			Message: fmt.Sprintf("the ConversionRules %s no longer fit the CRD (%v): objects cannot be read in other versions than their stored one until the rules are fixed", crd.Name, errs.ToAggregate())}}
	}
	losses, err := Losses(ctx, crd, rules)
	if err != nil {
		return []evolution.Finding{{Rule: "conversion-rules-invalid", Message: err.Error()}}
	}
	var out []evolution.Finding
	for _, l := range distinct(losses) {
		f := evolution.Finding{Rule: "conversion-loses-field", Version: l.To, Path: "." + l.Path,
			Message: fmt.Sprintf("%s→%s→%s under the ConversionRules: %s", l.From, l.To, l.From, lossText(l))}
		if l.Kind == roundtrip.Failed {
			f.Rule, f.Path = "conversion-fails", ""
		}
		out = append(out, f)
	}
	return out
}

// CRDFindings returns Findings for a CRD under its ConversionRules as
// they are now (none for a CRD without, or when they cannot be read).
func CRDFindings(cache *store.Cache) func(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) []evolution.Finding {
	return func(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) []evolution.Finding {
		it, err := cache.GetNewest(ctx, Prefix+crd.Name)
		if err != nil || it == nil {
			return nil
		}
		cr, err := Decode(it.Bytes())
		if err != nil {
			return nil
		}
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		return Findings(ctx, crd, cr.Spec)
	}
}

func orAbsent(raw []byte) string {
	if raw == nil {
		return "absent"
	}
	return string(raw)
}
