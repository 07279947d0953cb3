package openapi

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/controller/openapi/builder"
	"k8s.io/kube-openapi/pkg/cached"
	"k8s.io/kube-openapi/pkg/handler"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// The CRD document builders, with the options kube-apiserver uses
// (CustomResourceFieldSelectors is GA). Tests replace the builders to
// count builds.
var (
	buildCRDV3 = builder.BuildOpenAPIV3
	buildCRDV2 = builder.BuildOpenAPIV2
	v3Options  = builder.Options{V2: false, IncludeSelectableFields: true}
	v2Options  = builder.Options{V2: true, IncludeSelectableFields: true}
)

// crdDocs are the documents of one CRD at one resourceVersion. Nothing is
// built until a document is asked for, and then only once.
type crdDocs struct {
	group           string
	resourceVersion string
	// v3 is one document per served version.
	v3 map[string]cached.Value[*spec3.OpenAPI]
	// v2 is one document for every served version.
	v2 cached.Value[*spec.Swagger]
}

func newCRDDocs(crd *apiextensionsv1.CustomResourceDefinition) *crdDocs {
	etag := crd.Name + "@" + crd.ResourceVersion
	d := &crdDocs{
		group:           crd.Spec.Group,
		resourceVersion: crd.ResourceVersion,
		v3:              map[string]cached.Value[*spec3.OpenAPI]{},
	}
	var served []string
	for _, v := range crd.Spec.Versions {
		if !v.Served {
			continue
		}
		served = append(served, v.Name)
		d.v3[v.Name] = cached.Once(cached.Func(func() (*spec3.OpenAPI, string, error) {
			doc, err := buildCRDV3(crd, v.Name, v3Options)
			if err != nil {
				return nil, "", fmt.Errorf("CustomResourceDefinition %s, version %s: %w", crd.Name, v.Name, err)
			}
			return doc, etag, nil
		}))
	}
	d.v2 = cached.Once(cached.Func(func() (*spec.Swagger, string, error) {
		merged := &spec.Swagger{}
		for _, v := range served {
			doc, err := buildCRDV2(crd, v, v2Options)
			if err != nil {
				return nil, "", fmt.Errorf("CustomResourceDefinition %s, version %s: %w", crd.Name, v, err)
			}
			// The built-in document has its defaults pruned; so must this
			// one, to merge cleanly.
			doc.Definitions = handler.PruneDefaults(doc.Definitions)
			if merged, err = builder.MergeSpecs(merged, doc); err != nil {
				return nil, "", fmt.Errorf("CustomResourceDefinition %s: %w", crd.Name, err)
			}
		}
		return merged, etag, nil
	}))
	return d
}

// mergeV3 lazily merges the documents of one group/version. A document
// that fails to build is left out, as kube-apiserver leaves out a CRD
// whose document it cannot build.
func mergeV3(etag string, docs []cached.Value[*spec3.OpenAPI]) cached.Value[*spec3.OpenAPI] {
	return cached.MergeList(func(results []cached.Result[*spec3.OpenAPI]) (*spec3.OpenAPI, string, error) {
		var specs []*spec3.OpenAPI
		for _, r := range results {
			if r.Err != nil {
				slog.Warn("openapi: leaving a document out", "err", r.Err)
				continue
			}
			specs = append(specs, r.Value)
		}
		doc, err := builder.MergeSpecsV3(specs...)
		return doc, etag, err
	}, docs)
}

// mergeV2 lazily merges the CRD documents onto the built-in one, which
// wins any conflict.
func mergeV2(etag string, static cached.Value[*spec.Swagger], crds []cached.Value[*spec.Swagger]) cached.Value[*spec.Swagger] {
	all := append([]cached.Value[*spec.Swagger]{static}, crds...)
	return cached.MergeList(func(results []cached.Result[*spec.Swagger]) (*spec.Swagger, string, error) {
		if results[0].Err != nil {
			return nil, "", results[0].Err
		}
		var specs []*spec.Swagger
		for _, r := range results[1:] {
			if r.Err != nil {
				slog.Warn("openapi: leaving a document out", "err", r.Err)
				continue
			}
			specs = append(specs, r.Value)
		}
		doc, err := builder.MergeSpecs(results[0].Value, specs...)
		return doc, etag, err
	}, all)
}

// fingerprint identifies a set of CRDs at their resourceVersions; names
// must be sorted. A document is rebuilt only when its fingerprint changes.
func fingerprint(docs map[string]*crdDocs, names []string) string {
	var b strings.Builder
	for _, n := range names {
		b.WriteString(n)
		b.WriteByte('@')
		b.WriteString(docs[n].resourceVersion)
		b.WriteByte(',')
	}
	sum := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(sum[:])
}
