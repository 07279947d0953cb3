package webhook

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"

	"github.com/crdserver/crdserver/internal/conversion/review"
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

// ServeHTTP answers ConversionReviews (apiextensions.k8s.io/v1 and
// v1beta1, answered in the version asked): each object is converted
// independently, in order, and the response copies the request's uid. A
// failed conversion answers result.status Failure with the reason. A
// body over 128 MiB is refused (413), as crdserver's own rules webhook
// refuses it.
func (s *Scheme[H]) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	review.Serve(w, r, s.convertAll)
}

// convertAll converts the objects of one review; the first that fails
// fails the review.
func (s *Scheme[H]) convertAll(objs [][]byte, desiredAPIVersion string) ([][]byte, error) {
	out := make([][]byte, len(objs))
	for i, o := range objs {
		var err error
		if out[i], err = s.Convert(o, desiredAPIVersion); err != nil {
			return nil, fmt.Errorf("object %d: %v", i, err)
		}
	}
	return out, nil
}
