package conversion

import (
	"encoding/json"
	"fmt"
	"net/http"

	rulesv1alpha1 "github.com/crdserver/crdserver/internal/apis/conversionrules/v1alpha1"
	"github.com/crdserver/crdserver/internal/conversion/review"
)

// RulesWebhook serves ConversionReviews (apiextensions.k8s.io/v1 and
// v1beta1) with declarative rules: the conversion webhook that lets a CRD
// whose conversion crdserver does with rules work on a Kubernetes cluster.
func RulesWebhook(r *Rules) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		review.Serve(w, req, r.convertRaw)
	})
}

// convertRaw converts the objects of a review to the desired version.
func (r *Rules) convertRaw(objs [][]byte, to string) ([][]byte, error) {
	out := make([][]byte, len(objs))
	for i, o := range objs {
		obj, err := decodeNumbers(o)
		if err != nil {
			return nil, fmt.Errorf("object %d: %w", i, err)
		}
		if err := r.ConvertObject(obj, to); err != nil {
			return nil, err
		}
		if out[i], err = json.Marshal(obj); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// RulesFromObject reads a ConversionRules manifest (JSON or YAML decoded
// into a map) for a webhook: its rule set, and the group and versions it
// converts (from its name, <plural>.<group>, and its versions).
func RulesFromObject(name string, rs rulesv1alpha1.RuleSet) (*Rules, error) {
	_, group, ok := cutDot(name)
	if !ok {
		return nil, fmt.Errorf("the ConversionRules name %q is not <plural>.<group>", name)
	}
	versions := []string{rs.Hub}
	for _, v := range rs.Versions {
		versions = append(versions, v.Name)
	}
	r, errs := NewRules(rs, group, versions)
	if errs != nil {
		return nil, errs.ToAggregate()
	}
	return r, nil
}

func cutDot(s string) (string, string, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == '.' {
			return s[:i], s[i+1:], i > 0 && i < len(s)-1
		}
	}
	return s, "", false
}
