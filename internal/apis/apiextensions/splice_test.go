package apiextensions

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsv1beta1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1beta1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/crdserver/crdserver/internal/fixtures"
)

// repoCRDs are the v1 CRDs of the repository's examples and test data.
func repoCRDs(t *testing.T) []*apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	var out []*apiextensionsv1.CustomResourceDefinition
	root := filepath.Join("..", "..", "..")
	_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() && (d.Name() == ".git" || d.Name() == "results") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".yaml") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil || !bytes.Contains(b, []byte("kind: CustomResourceDefinition")) {
			return nil
		}
		docs := utilyaml.NewDocumentDecoder(nopCloser{bytes.NewReader(b)})
		buf := make([]byte, len(b)+1)
		for {
			n, err := docs.Read(buf)
			if err != nil {
				break
			}
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if yaml.Unmarshal(buf[:n], crd) == nil && crd.Kind == "CustomResourceDefinition" && crd.APIVersion == "apiextensions.k8s.io/v1" {
				out = append(out, crd)
			}
		}
		return nil
	})
	return out
}

type nopCloser struct{ *bytes.Reader }

func (nopCloser) Close() error { return nil }

// variants are CRDs made to take each of v1beta1's shapes: versions with
// the same schema, subresources and columns (one top-level validation), and
// with different ones.
func variants(crd *apiextensionsv1.CustomResourceDefinition) []*apiextensionsv1.CustomResourceDefinition {
	same := crd.DeepCopy()
	v := same.Spec.Versions[0]
	v.Name, v.Storage, v.Served = "v9", false, true
	same.Spec.Versions = append(same.Spec.Versions, v)
	differ := same.DeepCopy()
	last := &differ.Spec.Versions[len(differ.Spec.Versions)-1]
	last.Schema = last.Schema.DeepCopy()
	last.Schema.OpenAPIV3Schema.Description = "another"
	last.AdditionalPrinterColumns = append(last.AdditionalPrinterColumns, apiextensionsv1.CustomResourceColumnDefinition{Name: "X", Type: "string", JSONPath: ".x"})
	last.Subresources = nil
	return []*apiextensionsv1.CustomResourceDefinition{same, differ}
}

// TestSplicedAsConverted: what the spliced conversion stores decodes as
// what the whole conversion stores, and reads back the same; the corpus's
// CRDs take the spliced way.
func TestSplicedAsConverted(t *testing.T) {
	corpus, _, err := fixtures.Corpus()
	if err != nil {
		t.Fatal(err)
	}
	crds := append(repoCRDs(t), corpus...)
	if len(crds) < 30 {
		t.Fatalf("only %d CRDs", len(crds))
	}
	for _, crd := range corpus[:3] {
		crds = append(crds, variants(crd)...)
	}
	spliced := 0
	for _, crd := range crds {
		v1 := written(t, crd)
		fast, ok, err := toStorageSpliced(v1)
		if err != nil {
			t.Fatal(err)
		}
		slow, err := convertCRD(v1, StorageVersion)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			continue
		}
		spliced++
		var a, b apiextensionsv1beta1.CustomResourceDefinition
		if err := json.Unmarshal(fast, &a); err != nil {
			t.Fatalf("%s: %v", crd.Name, err)
		}
		if err := json.Unmarshal(slow, &b); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%s: the spliced conversion stores another CRD", crd.Name)
		}
		ra, _ := NewCRDStorage().FromStorage(context.Background(), CRDPrefix+"x", fast)
		rb, _ := NewCRDStorage().FromStorage(context.Background(), CRDPrefix+"x", slow)
		if !bytes.Equal(ra, rb) || !bytes.Equal(ra, v1) {
			t.Errorf("%s: the spliced conversion reads back otherwise", crd.Name)
		}
	}
	t.Logf("%d of %d CRDs spliced", spliced, len(crds))
	if spliced < len(corpus) {
		t.Errorf("%d of %d CRDs spliced", spliced, len(crds))
	}
}

// A schema whose conversion changes it (a null default is dropped, a
// large integer rounded) is left to the whole conversion.
func TestSpliceLeavesChangingSchemas(t *testing.T) {
	if spliceable([]byte(`{"openAPIV3Schema":{"properties":{"a":{"default":null}}}}`)) {
		t.Error("a null default is spliced")
	}
	crds, err := fixtures.Sample()
	if err != nil {
		t.Fatal(err)
	}
	for _, value := range []string{"9007199254740993"} {
		crd := crds[0].DeepCopy()
		props := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties
		props["odd"] = apiextensionsv1.JSONSchemaProps{Type: "integer", Nullable: true, Default: &apiextensionsv1.JSON{Raw: []byte(value)}}
		v1 := written(t, crd)
		if _, ok, err := toStorageSpliced(v1); ok || err != nil {
			t.Errorf("default %s: spliced (%v)", value, err)
		}
		stored, err := NewCRDStorage().ToStorage(context.Background(), CRDPrefix+"x", v1)
		slow, _ := convertCRD(v1, StorageVersion)
		if err != nil || !bytes.Equal(stored, slow) {
			t.Errorf("default %s: not stored as the whole conversion stores it (%v)", value, err)
		}
	}
}
