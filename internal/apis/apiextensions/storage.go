package apiextensions

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsinstall "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/install"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsv1beta1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/crdserver/crdserver/internal/resource"
)

// StorageVersion is the apiVersion CRDs are stored in, as Kubernetes
// stores them: v1beta1, the more compact encoding (kubernetes/kubernetes
// #82292), which every server that shares an etcd with Kubernetes reads.
const StorageVersion = "apiextensions.k8s.io/v1beta1"

// storageScheme converts CRDs between their versions with Kubernetes' own
// conversions and defaults.
var storageScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	apiextensionsinstall.Install(s)
	return s
}()

// CRDStorage is the store.Transformer of CRDs: every CRD is served (and
// cached) as apiextensions.k8s.io/v1 and stored as v1beta1, as Kubernetes
// stores it; a stored CRD of either version reads as v1 (v1beta1 with
// Kubernetes' v1beta1 defaults, as its storage decoder applies them). Keys
// outside CRDPrefix pass through.
//
// A conversion is a decode, two conversions and an encode of the whole
// CRD, schemas included: the stored bytes of the CRDs this process last
// wrote or read are remembered with what they read as (the v1 form they
// were written from reads back exactly as it was: TestStoredRoundTrip), so
// that the watch cache's copy of a write, and the read of the next update,
// convert nothing.
type CRDStorage struct {
	mu     sync.Mutex
	recent map[string]storedCRD
	order  []string // keys of recent, oldest first
	bytes  int      // of recent, at most limit
	limit  int
}

// storedCRD is a CRD as stored and as it reads.
type storedCRD struct{ stored, v1 []byte }

// NewCRDStorage returns the transformer of CRDs.
func NewCRDStorage() *CRDStorage {
	return &CRDStorage{recent: map[string]storedCRD{}, limit: maxRememberedBytes}
}

// maxRememberedBytes bounds the bytes of the CRDs a CRDStorage remembers.
const maxRememberedBytes = 2 << 20

// remember records what stored reads as, at key.
func (s *CRDStorage) remember(key string, stored, v1 []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.recent[key]; ok {
		s.bytes -= len(old.stored) + len(old.v1)
		s.order = slices.DeleteFunc(s.order, func(k string) bool { return k == key })
	}
	s.recent[key] = storedCRD{stored: stored, v1: v1}
	s.order = append(s.order, key)
	s.bytes += len(stored) + len(v1)
	for s.bytes > s.limit && len(s.order) > 1 {
		oldest := s.recent[s.order[0]]
		s.bytes -= len(oldest.stored) + len(oldest.v1)
		delete(s.recent, s.order[0])
		s.order = s.order[1:]
	}
}

// recall returns what stored reads as if it is remembered at key.
func (s *CRDStorage) recall(key string, stored []byte) ([]byte, bool) {
	s.mu.Lock()
	r, ok := s.recent[key]
	s.mu.Unlock()
	if !ok || !bytes.Equal(r.stored, stored) {
		return nil, false
	}
	return r.v1, true
}

// ToStorage implements store.Transformer.
func (s *CRDStorage) ToStorage(_ context.Context, key string, value []byte) ([]byte, error) {
	if !strings.HasPrefix(key, CRDPrefix) {
		return value, nil
	}
	stored, ok, err := toStorageSpliced(value)
	if err != nil || !ok {
		stored, err = convertCRD(value, apiextensionsv1beta1.SchemeGroupVersion.String())
	}
	if err != nil {
		return nil, err
	}
	if bytes.Contains(stored, []byte(`"apiextensions.k8s.io/v1beta1"`)) {
		// The caller may edit value in place once it is written.
		s.remember(key, stored, bytes.Clone(value))
	}
	return stored, nil
}

// FromStorage implements store.Transformer.
func (s *CRDStorage) FromStorage(_ context.Context, key string, stored []byte) ([]byte, error) {
	if !strings.HasPrefix(key, CRDPrefix) || !bytes.Contains(stored, []byte(`"apiextensions.k8s.io/v1beta1"`)) {
		return stored, nil
	}
	if v1, ok := s.recall(key, stored); ok {
		return v1, nil
	}
	v1, err := convertCRD(stored, apiextensionsv1.SchemeGroupVersion.String())
	if err != nil {
		return nil, err
	}
	// In the encoding the engine writes, so that an update that changes
	// nothing is seen to change nothing.
	obj, err := resource.DecodeObject(v1)
	if err != nil {
		return nil, err
	}
	out, err := obj.Encode()
	if err != nil {
		return nil, err
	}
	s.remember(key, stored, out)
	return out, nil
}

// convertCRD converts an encoded CRD to the apiVersion to, through the
// internal version, with the target version's defaults.
func convertCRD(raw []byte, to string) ([]byte, error) {
	var tm struct {
		APIVersion string `json:"apiVersion"`
	}
	if err := json.Unmarshal(raw, &tm); err != nil {
		return nil, err
	}
	if tm.APIVersion == to {
		return raw, nil
	}
	var in runtime.Object
	switch tm.APIVersion {
	case StorageVersion:
		in = &apiextensionsv1beta1.CustomResourceDefinition{}
	case "apiextensions.k8s.io/v1":
		in = &apiextensionsv1.CustomResourceDefinition{}
	default:
		return nil, fmt.Errorf("a stored CustomResourceDefinition of apiVersion %q", tm.APIVersion)
	}
	if err := json.Unmarshal(raw, in); err != nil {
		return nil, err
	}
	storageScheme.Default(in)
	internal := &apiextensions.CustomResourceDefinition{}
	if err := storageScheme.Convert(in, internal, nil); err != nil {
		return nil, err
	}
	var out runtime.Object
	if to == StorageVersion {
		out = &apiextensionsv1beta1.CustomResourceDefinition{}
	} else {
		out = &apiextensionsv1.CustomResourceDefinition{}
	}
	if err := storageScheme.Convert(internal, out, nil); err != nil {
		return nil, err
	}
	storageScheme.Default(out)
	gv := strings.SplitN(to, "/", 2)
	out.GetObjectKind().SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition").GroupKind().WithVersion(gv[1]))
	return json.Marshal(out)
}
