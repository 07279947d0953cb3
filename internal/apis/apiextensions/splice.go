package apiextensions

import (
	"bytes"
	"encoding/json"
	"fmt"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsv1beta1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Converting a CRD decodes, converts twice and encodes its schemas, most
// of a large CRD, which are the same in v1 and v1beta1. toStorageSpliced
// converts the CRD with each schema replaced by a placeholder (the same
// placeholder for the same schema, so that v1beta1's one validation for
// versions with equal schemas comes out the same), then puts the schemas,
// as they were, where the placeholders came out. What it stores reads
// back as what the whole conversion stores does (TestSplicedAsConverted).
//
// A schema whose conversion would change it is left to the whole
// conversion: JSON values pass through float64 (an integer beyond 2^53
// rounds), and a null default or example is dropped.

// splicedCRD is a v1 CRD whose versions' schemas are kept encoded.
type splicedCRD struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        metav1.ObjectMeta                              `json:"metadata"`
	Spec            splicedSpec                                    `json:"spec"`
	Status          apiextensionsv1.CustomResourceDefinitionStatus `json:"status"`
}

type splicedSpec struct {
	apiextensionsv1.CustomResourceDefinitionSpec
	Versions []splicedVersion `json:"versions"`
}

type splicedVersion struct {
	apiextensionsv1.CustomResourceDefinitionVersion
	Schema json.RawMessage `json:"schema,omitempty"`
}

// placeholder is what stands for the i-th distinct schema.
func placeholder(i int) string { return fmt.Sprintf("\x00crdserver-schema-%d", i) }

// toStorageSpliced converts an encoded v1 CRD to v1beta1; false when the
// whole conversion must do it.
func toStorageSpliced(raw []byte) ([]byte, bool, error) {
	var s splicedCRD
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, false, err
	}
	if s.APIVersion != "apiextensions.k8s.io/v1" {
		return nil, false, nil
	}
	in := &apiextensionsv1.CustomResourceDefinition{TypeMeta: s.TypeMeta, ObjectMeta: s.Metadata, Spec: s.Spec.CustomResourceDefinitionSpec, Status: s.Status}
	in.Spec.Versions = make([]apiextensionsv1.CustomResourceDefinitionVersion, len(s.Spec.Versions))
	var schemas [][]byte
	for i, v := range s.Spec.Versions {
		in.Spec.Versions[i] = v.CustomResourceDefinitionVersion
		if len(v.Schema) == 0 || bytes.Equal(v.Schema, []byte("null")) {
			continue
		}
		if !spliceable(v.Schema) {
			return nil, false, nil
		}
		n := -1
		for j, other := range schemas {
			if bytes.Equal(other, v.Schema) {
				n = j
			}
		}
		if n < 0 {
			n = len(schemas)
			schemas = append(schemas, v.Schema)
		}
		in.Spec.Versions[i].Schema = &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Description: placeholder(n)}}
	}
	storageScheme.Default(in)
	internal := &apiextensions.CustomResourceDefinition{}
	if err := storageScheme.Convert(in, internal, nil); err != nil {
		return nil, false, err
	}
	out := &apiextensionsv1beta1.CustomResourceDefinition{}
	if err := storageScheme.Convert(internal, out, nil); err != nil {
		return nil, false, err
	}
	storageScheme.Default(out)
	out.SetGroupVersionKind(apiextensionsv1beta1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
	enc, err := json.Marshal(out)
	if err != nil {
		return nil, false, err
	}
	for i, schema := range schemas {
		p, _ := json.Marshal(apiextensionsv1beta1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1beta1.JSONSchemaProps{Description: placeholder(i)}})
		if !bytes.Contains(enc, p) {
			return nil, false, nil
		}
		enc = bytes.ReplaceAll(enc, p, schema)
	}
	return enc, true, nil
}

// spliceable reports whether a v1 schema converts to itself: no null
// (a null default or example is dropped) and no run of 16 digits (an
// integer JSON value beyond 2^53 would be rounded).
func spliceable(schema []byte) bool {
	if bytes.Contains(schema, []byte(":null")) || bytes.Contains(schema, []byte(placeholderPrefix)) {
		return false
	}
	digits := 0
	for _, c := range schema {
		if c >= '0' && c <= '9' {
			digits++
			if digits >= 16 {
				return false
			}
		} else {
			digits = 0
		}
	}
	return true
}

// placeholderPrefix begins every placeholder, as encoded.
const placeholderPrefix = `\u0000crdserver-schema-`
