package openapi

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/controller/openapi/builder"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kube-openapi/pkg/handler"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/crdserver/crdserver/internal/budget"
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

// crdDocs are the documents of one CRD at one uid and generation (they
// are made of its spec alone). Nothing is built until a document is asked
// for; what is built is held in a budget.Pool, which may release it.
type crdDocs struct {
	group      string
	uid        types.UID
	generation int64
	// v3 is one document per served version.
	v3 map[string]*budget.Value[*spec3.OpenAPI]
	// v2 is one document for every served version, encoded and
	// compressed (packPiece).
	v2 *budget.Value[[]byte]
}

// newCRDDocs makes the documents of crd, which may lack its schemas: full
// gives the whole CRD when a document is built, version the CRD with the
// schema of one version (a v3 document needs no other).
func newCRDDocs(crd *apiextensionsv1.CustomResourceDefinition, full func() (*apiextensionsv1.CustomResourceDefinition, error),
	version map[string]func() (*apiextensionsv1.CustomResourceDefinition, error), pool *budget.Pool) *crdDocs {
	d := &crdDocs{
		group:      crd.Spec.Group,
		uid:        crd.UID,
		generation: crd.Generation,
		v3:         map[string]*budget.Value[*spec3.OpenAPI]{},
	}
	name := crd.Name
	var served []string
	for _, v := range crd.Spec.Versions {
		if !v.Served {
			continue
		}
		served = append(served, v.Name)
		source := version[v.Name]
		d.v3[v.Name] = budget.NewValue(pool, func() (*spec3.OpenAPI, int64, error) {
			crd, err := source()
			if err != nil {
				return nil, 0, err
			}
			doc, err := buildCRDV3(crd, v.Name, v3Options)
			if err != nil {
				return nil, 0, fmt.Errorf("CustomResourceDefinition %s, version %s: %w", name, v.Name, err)
			}
			return doc, schemasCost(doc.Components.Schemas), nil
		})
	}
	d.v2 = budget.NewValue(pool, func() ([]byte, int64, error) {
		crd, err := full()
		if err != nil {
			return nil, 0, err
		}
		merged := &spec.Swagger{}
		for _, v := range served {
			doc, err := buildCRDV2(crd, v, v2Options)
			if err != nil {
				return nil, 0, fmt.Errorf("CustomResourceDefinition %s, version %s: %w", name, v, err)
			}
			// The built-in document has its defaults pruned; so must this
			// one, to merge cleanly.
			doc.Definitions = handler.PruneDefaults(doc.Definitions)
			if merged, err = builder.MergeSpecs(merged, doc); err != nil {
				return nil, 0, fmt.Errorf("CustomResourceDefinition %s: %w", name, err)
			}
		}
		packed, err := packPiece(merged)
		return packed, int64(len(packed)), err
	})
	return d
}

// drop releases what was built of the documents (the CRD changed or went).
func (d *crdDocs) drop() {
	for _, v := range d.v3 {
		v.Drop()
	}
	d.v2.Drop()
}

// schemaBytes is the estimated bytes of a document per schema node
// (measured on the CRDs of a real Crossplane provider).
const schemaBytesPerNode = 1000

// schemasCost estimates the bytes of a v3 document's schemas.
func schemasCost(defs map[string]*spec.Schema) int64 {
	n := 0
	for _, s := range defs {
		n += countSchema(s)
	}
	return int64(n) * schemaBytesPerNode
}

// countSchema counts the schemas in s, s included.
func countSchema(s *spec.Schema) int {
	if s == nil {
		return 0
	}
	n := 1
	for k := range s.Properties {
		p := s.Properties[k]
		n += countSchema(&p)
	}
	if s.Items != nil {
		n += countSchema(s.Items.Schema)
	}
	if s.AdditionalProperties != nil {
		n += countSchema(s.AdditionalProperties.Schema)
	}
	for i := range s.AllOf {
		n += countSchema(&s.AllOf[i])
	}
	return n
}

// fingerprint identifies a set of CRDs at their uids and generations
// (names sorted), and extra: a document made of them is the same while
// its fingerprint is. It is the ETag (and the hash in the v3 root) of the
// document, so that listing the documents builds none.
func fingerprint(docs map[string]*crdDocs, names []string, extra string) string {
	var b strings.Builder
	b.WriteString(extra)
	for _, n := range names {
		d := docs[n]
		b.WriteByte(',')
		b.WriteString(n)
		b.WriteByte('@')
		b.WriteString(string(d.uid))
		b.WriteByte('@')
		b.WriteString(strconv.FormatInt(d.generation, 10))
	}
	sum := sha256.Sum256([]byte(b.String()))
	return strings.ToUpper(hex.EncodeToString(sum[:]))
}
