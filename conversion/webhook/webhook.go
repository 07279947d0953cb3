package webhook

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Scheme converts the objects of one kind between its versions through an
// in-memory hub type H.
type Scheme[H any] struct {
	mu       sync.RWMutex
	versions map[string]codec[H] // by apiVersion
}

type codec[H any] struct {
	toHub   func(raw []byte) (*H, error)
	fromHub func(h *H) ([]byte, error)
}

// NewScheme returns a Scheme with no versions.
func NewScheme[H any]() *Scheme[H] { return &Scheme[H]{versions: map[string]codec[H]{}} }

// AddVersion registers version apiVersion (group/version) of the kind:
// objects of that version decode into V, and toHub and fromHub convert
// between V and the hub. Adding a version costs these two functions.
func AddVersion[V, H any](s *Scheme[H], apiVersion string, toHub func(*V) (*H, error), fromHub func(*H) (*V, error)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.versions[apiVersion] = codec[H]{
		toHub: func(raw []byte) (*H, error) {
			v := new(V)
			if err := json.Unmarshal(raw, v); err != nil {
				return nil, err
			}
			return toHub(v)
		},
		fromHub: func(h *H) ([]byte, error) {
			v, err := fromHub(h)
			if err != nil {
				return nil, err
			}
			return json.Marshal(v)
		},
	}
}

// Convert converts one encoded object to desiredAPIVersion through the hub.
// The result has the desired apiVersion, the original kind, and the
// original metadata except labels and annotations, which the conversion
// functions may change; a change of name, namespace or uid is an error.
func (s *Scheme[H]) Convert(obj []byte, desiredAPIVersion string) ([]byte, error) {
	var head struct {
		APIVersion string         `json:"apiVersion"`
		Kind       string         `json:"kind"`
		Metadata   map[string]any `json:"metadata"`
	}
	if err := json.Unmarshal(obj, &head); err != nil {
		return nil, fmt.Errorf("malformed object: %v", err)
	}
	if head.APIVersion == desiredAPIVersion {
		return obj, nil
	}
	s.mu.RLock()
	from, okFrom := s.versions[head.APIVersion]
	to, okTo := s.versions[desiredAPIVersion]
	s.mu.RUnlock()
	if !okFrom {
		return nil, fmt.Errorf("unknown apiVersion %q", head.APIVersion)
	}
	if !okTo {
		return nil, fmt.Errorf("unknown desired apiVersion %q", desiredAPIVersion)
	}
	hub, err := from.toHub(obj)
	if err != nil {
		return nil, fmt.Errorf("%s to hub: %v", head.APIVersion, err)
	}
	out, err := to.fromHub(hub)
	if err != nil {
		return nil, fmt.Errorf("hub to %s: %v", desiredAPIVersion, err)
	}
	var converted map[string]any
	if err := json.Unmarshal(out, &converted); err != nil {
		return nil, err
	}
	md, _ := converted["metadata"].(map[string]any)
	merged := map[string]any{}
	for k, v := range head.Metadata {
		merged[k] = v
	}
	for _, f := range []string{"name", "namespace", "uid"} {
		if v, ok := md[f]; ok && v != "" && v != head.Metadata[f] {
			return nil, fmt.Errorf("conversion changed metadata.%s from %v to %v", f, head.Metadata[f], v)
		}
	}
	for _, f := range []string{"labels", "annotations"} {
		if v, ok := md[f]; ok {
			merged[f] = v
		}
	}
	converted["apiVersion"] = desiredAPIVersion
	converted["kind"] = head.Kind
	converted["metadata"] = merged
	return json.Marshal(converted)
}

// maxBody bounds a ConversionReview request.
const maxBody = 64 * 1024 * 1024

// ServeHTTP answers ConversionReviews (apiextensions.k8s.io/v1 and
// v1beta1, answered in the version asked): each object is converted
// independently, in order, and the response copies the request's uid. A
// failed conversion answers result.status Failure with the reason.
func (s *Scheme[H]) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "ConversionReviews are POSTed", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var review apiextensionsv1.ConversionReview
	if err := json.Unmarshal(body, &review); err != nil || review.Request == nil {
		http.Error(w, fmt.Sprintf("not a ConversionReview: %v", err), http.StatusBadRequest)
		return
	}
	if review.APIVersion != "apiextensions.k8s.io/v1" && review.APIVersion != "apiextensions.k8s.io/v1beta1" {
		http.Error(w, fmt.Sprintf("unsupported ConversionReview version %q", review.APIVersion), http.StatusBadRequest)
		return
	}
	req := review.Request
	resp := &apiextensionsv1.ConversionResponse{UID: req.UID, Result: metav1.Status{Status: metav1.StatusSuccess}}
	resp.ConvertedObjects = make([]runtime.RawExtension, 0, len(req.Objects))
	for i, o := range req.Objects {
		out, err := s.Convert(o.Raw, req.DesiredAPIVersion)
		if err != nil {
			resp.ConvertedObjects = nil
			resp.Result = metav1.Status{Status: metav1.StatusFailure, Message: fmt.Sprintf("object %d: %v", i, err)}
			break
		}
		resp.ConvertedObjects = append(resp.ConvertedObjects, runtime.RawExtension{Raw: out})
	}
	answer := apiextensionsv1.ConversionReview{TypeMeta: review.TypeMeta, Response: resp}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(&answer)
}
