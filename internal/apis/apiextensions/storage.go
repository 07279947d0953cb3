package apiextensions

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

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
type CRDStorage struct{}

// ToStorage implements store.Transformer.
func (CRDStorage) ToStorage(_ context.Context, key string, value []byte) ([]byte, error) {
	if !strings.HasPrefix(key, CRDPrefix) {
		return value, nil
	}
	return convertCRD(value, apiextensionsv1beta1.SchemeGroupVersion.String())
}

// FromStorage implements store.Transformer.
func (CRDStorage) FromStorage(_ context.Context, key string, stored []byte) ([]byte, error) {
	if !strings.HasPrefix(key, CRDPrefix) || !bytes.Contains(stored, []byte(`"apiextensions.k8s.io/v1beta1"`)) {
		return stored, nil
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
	return obj.Encode()
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
