package conversion

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsv1beta1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	rulesv1alpha1 "github.com/crdserver/crdserver/internal/apis/conversionrules/v1alpha1"
)

// maxReviewBytes bounds a ConversionReview request (Kubernetes' request
// limit).
const maxReviewBytes = 3 * 1024 * 1024

// RulesWebhook serves ConversionReviews (apiextensions.k8s.io/v1 and
// v1beta1) with declarative rules: the conversion webhook that lets a CRD
// whose conversion crdserver does with rules work on a Kubernetes cluster.
func RulesWebhook(r *Rules) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodPost {
			http.Error(w, "ConversionReviews are POSTed", http.StatusMethodNotAllowed)
			return
		}
		body, err := io.ReadAll(io.LimitReader(req.Body, maxReviewBytes+1))
		if err != nil || len(body) > maxReviewBytes {
			http.Error(w, "the request body is too large or unreadable", http.StatusRequestEntityTooLarge)
			return
		}
		var tm metav1.TypeMeta
		if err := json.Unmarshal(body, &tm); err != nil {
			http.Error(w, "not a ConversionReview: "+err.Error(), http.StatusBadRequest)
			return
		}
		var out any
		switch tm.APIVersion {
		case apiextensionsv1.SchemeGroupVersion.String():
			var rev apiextensionsv1.ConversionReview
			if err := json.Unmarshal(body, &rev); err != nil || rev.Request == nil {
				http.Error(w, "not a ConversionReview with a request", http.StatusBadRequest)
				return
			}
			objs, err := r.convertRaw(rev.Request.Objects, rev.Request.DesiredAPIVersion)
			rev.Response = &apiextensionsv1.ConversionResponse{UID: rev.Request.UID, ConvertedObjects: objs, Result: result(err)}
			rev.Request = nil
			out = &rev
		case apiextensionsv1beta1.SchemeGroupVersion.String():
			var rev apiextensionsv1beta1.ConversionReview
			if err := json.Unmarshal(body, &rev); err != nil || rev.Request == nil {
				http.Error(w, "not a ConversionReview with a request", http.StatusBadRequest)
				return
			}
			objs, err := r.convertRaw(rev.Request.Objects, rev.Request.DesiredAPIVersion)
			rev.Response = &apiextensionsv1beta1.ConversionResponse{UID: rev.Request.UID, ConvertedObjects: objs, Result: result(err)}
			rev.Request = nil
			out = &rev
		default:
			http.Error(w, fmt.Sprintf("unsupported ConversionReview version %q", tm.APIVersion), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	})
}

func result(err error) metav1.Status {
	if err != nil {
		return metav1.Status{Status: metav1.StatusFailure, Message: err.Error()}
	}
	return metav1.Status{Status: metav1.StatusSuccess}
}

// convertRaw converts the objects of a review to the desired version.
func (r *Rules) convertRaw(objs []runtime.RawExtension, to string) ([]runtime.RawExtension, error) {
	out := make([]runtime.RawExtension, len(objs))
	for i, o := range objs {
		obj, err := decodeNumbers(o.Raw)
		if err != nil {
			return nil, fmt.Errorf("object %d: %w", i, err)
		}
		if err := r.ConvertObject(obj, to); err != nil {
			return nil, err
		}
		b, err := json.Marshal(obj)
		if err != nil {
			return nil, err
		}
		out[i] = runtime.RawExtension{Raw: b}
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
