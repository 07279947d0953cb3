package openapi

import (
	"encoding/json"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

func TestBuiltinDefinitions(t *testing.T) {
	p := New(builtins(t), nil)
	tests := []struct {
		doc, name string
		fields    []string // properties it must have
	}{
		{"api/v1", "io.k8s.api.core.v1.ConfigMap", []string{"data", "binaryData", "immutable", "metadata"}},
		{"api/v1", "io.k8s.api.core.v1.Secret", []string{"data", "stringData", "type"}},
		{"api/v1", "io.k8s.api.core.v1.ServiceAccount", []string{"secrets", "imagePullSecrets", "automountServiceAccountToken"}},
		{"api/v1", "io.k8s.api.core.v1.Event", []string{"involvedObject", "reason", "series", "eventTime"}},
		{"api/v1", "io.k8s.api.authentication.v1.TokenRequest", []string{"spec", "status"}},
		{"apis/events.k8s.io/v1", "io.k8s.api.events.v1.Event", []string{"regarding", "note", "eventTime", "series"}},
		{"apis/coordination.k8s.io/v1", "io.k8s.api.coordination.v1.Lease", []string{"spec"}},
		{"apis/coordination.k8s.io/v1", "io.k8s.api.coordination.v1.LeaseSpec", []string{"holderIdentity", "leaseDurationSeconds", "renewTime"}},
		{"apis/rbac.authorization.k8s.io/v1", "io.k8s.api.rbac.v1.ClusterRole", []string{"rules", "aggregationRule"}},
	}
	docs := map[string]*spec.Schema{}
	for _, tt := range tests {
		s := document(t, p, tt.doc).Components.Schemas[tt.name]
		if s == nil {
			t.Errorf("%s has no %s", tt.doc, tt.name)
			continue
		}
		docs[tt.name] = s
		if s.Description == "" || !slices.Equal(s.Type, []string{"object"}) {
			t.Errorf("%s: description %q, type %v", tt.name, s.Description, s.Type)
		}
		for _, f := range tt.fields {
			if prop, ok := s.Properties[f]; !ok || prop.Description == "" {
				t.Errorf("%s.%s: %+v", tt.name, f, prop)
			}
		}
		for _, f := range []string{"apiVersion", "kind"} {
			if _, ok := s.Properties[f]; !ok && !strings.HasSuffix(tt.name, "Spec") {
				t.Errorf("%s has no %s", tt.name, f)
			}
		}
	}

	cm := docs["io.k8s.api.core.v1.ConfigMap"]
	if data := cm.Properties["data"]; data.AdditionalProperties == nil || !slices.Equal(data.AdditionalProperties.Schema.Type, []string{"string"}) {
		t.Errorf("ConfigMap.data: %+v", data)
	}
	if bin := cm.Properties["binaryData"]; bin.AdditionalProperties == nil || bin.AdditionalProperties.Schema.Format != "byte" {
		t.Errorf("ConfigMap.binaryData: %+v", bin)
	}
	secrets := docs["io.k8s.api.core.v1.ServiceAccount"].Properties["secrets"]
	if secrets.Extensions[extensionPatchStrategy] != "merge" || secrets.Extensions[extensionPatchMergeKey] != "name" ||
		secrets.Extensions[extensionListType] != "map" || secrets.Items.Schema.Ref.String() != "#/components/schemas/io.k8s.api.core.v1.ObjectReference" {
		t.Errorf("ServiceAccount.secrets: %+v", secrets)
	}
	if duration := docs["io.k8s.api.coordination.v1.LeaseSpec"].Properties["leaseDurationSeconds"]; duration.Format != "int32" {
		t.Errorf("LeaseSpec.leaseDurationSeconds: %+v", duration)
	}
	if rules := docs["io.k8s.api.rbac.v1.ClusterRole"].Properties["rules"]; rules.Extensions[extensionListType] != "atomic" {
		t.Errorf("ClusterRole.rules: %+v", rules)
	}
	if req := docs["io.k8s.api.core.v1.Event"].Required; !slices.Equal(req, []string{"metadata", "involvedObject"}) {
		t.Errorf("Event.required %v", req)
	}
	if req := docs["io.k8s.api.events.v1.Event"].Required; !slices.Equal(req, []string{"eventTime"}) {
		t.Errorf("events.k8s.io Event.required %v", req)
	}
}

// kubeExcerpt is an excerpt of kube-apiserver v1.37.2's OpenAPI v3
// documents: some schemas and paths, by document.
type kubeExcerpt map[string]struct {
	Schemas map[string]json.RawMessage `json:"schemas"`
	Paths   map[string]json.RawMessage `json:"paths"`
}

// knownDifferences are what crdserver's documents lack, as paths in the
// excerpt's schemas: the list types of authentication.k8s.io and
// authorization.k8s.io types, which client-go's structured-merge-diff
// schema does not have (listtypes.go).
var knownDifferences = []string{
	"io.k8s.api.authentication.v1.TokenRequestSpec/properties/audiences/x-kubernetes-list-type",
	"io.k8s.api.authentication.v1.UserInfo/properties/groups/x-kubernetes-list-type",
	"io.k8s.api.authorization.v1.ResourceRule/properties/apiGroups/x-kubernetes-list-type",
	"io.k8s.api.authorization.v1.ResourceRule/properties/resourceNames/x-kubernetes-list-type",
	"io.k8s.api.authorization.v1.ResourceRule/properties/resources/x-kubernetes-list-type",
	"io.k8s.api.authorization.v1.ResourceRule/properties/verbs/x-kubernetes-list-type",
}

func TestDocumentsMatchKubernetes(t *testing.T) {
	b, err := os.ReadFile("testdata/kube-v1.37.2-openapi-v3-excerpt.json")
	if err != nil {
		t.Fatal(err)
	}
	var kube kubeExcerpt
	if err := json.Unmarshal(b, &kube); err != nil {
		t.Fatal(err)
	}
	p := New(builtins(t), nil)
	for path, want := range kube {
		w := get(t, p, "/openapi/v3/"+path, "application/json")
		var ours struct {
			Paths      map[string]any `json:"paths"`
			Components struct {
				Schemas map[string]any `json:"schemas"`
			} `json:"components"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &ours); err != nil {
			t.Fatal(err)
		}
		for name, raw := range want.Schemas {
			var kubeSchema any
			if err := json.Unmarshal(raw, &kubeSchema); err != nil {
				t.Fatal(err)
			}
			for _, d := range knownDifferences {
				if rest, ok := strings.CutPrefix(d, name+"/"); ok {
					remove(kubeSchema, strings.Split(rest, "/"))
				}
			}
			for _, diff := range jsonDiff(name, ours.Components.Schemas[name], kubeSchema) {
				t.Errorf("%s: %s", path, diff)
			}
		}
		for name, raw := range want.Paths {
			var kubePath any
			if err := json.Unmarshal(raw, &kubePath); err != nil {
				t.Fatal(err)
			}
			for _, diff := range jsonDiff(name, ours.Paths[name], kubePath) {
				t.Errorf("%s: %s", path, diff)
			}
		}
	}
}

// remove deletes the member at path of a decoded JSON object.
func remove(v any, path []string) {
	m, ok := v.(map[string]any)
	if !ok {
		return
	}
	if len(path) == 1 {
		delete(m, path[0])
		return
	}
	remove(m[path[0]], path[1:])
}

// jsonDiff lists the differences between two decoded JSON values.
func jsonDiff(at string, got, want any) []string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return []string{at + ": not an object"}
		}
		var diffs []string
		for k := range w {
			if _, ok := g[k]; !ok {
				diffs = append(diffs, at+"/"+k+": missing")
			}
		}
		for k, gv := range g {
			if wv, ok := w[k]; ok {
				diffs = append(diffs, jsonDiff(at+"/"+k, gv, wv)...)
			} else {
				diffs = append(diffs, at+"/"+k+": not in Kubernetes' document")
			}
		}
		return diffs
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			break
		}
		var diffs []string
		for i := range w {
			diffs = append(diffs, jsonDiff(at+"/"+strconv.Itoa(i), g[i], w[i])...)
		}
		return diffs
	}
	if !reflect.DeepEqual(got, want) {
		g, _ := json.Marshal(got)
		wj, _ := json.Marshal(want)
		return []string{at + ": " + string(g) + ", Kubernetes has " + string(wj)}
	}
	return nil
}

// The types of TestTypeDefinitions.
type (
	sampleObject struct {
		metav1.TypeMeta `json:",inline"`
		Embedded        `json:",inline"`
		Name            string            `json:"name"`
		Count           *int32            `json:"count,omitempty"`
		Size            int64             `json:"size,omitempty"`
		Ratio           float64           `json:"ratio,omitempty"`
		Flag            bool              `json:"flag"`
		Raw             []byte            `json:"raw,omitempty"`
		Labels          map[string]string `json:"labels,omitempty"`
		Items           []sampleItem      `json:"items,omitempty" patchStrategy:"merge" patchMergeKey:"key"`
		Item            sampleItem        `json:"item"`
		Quantity        resource.Quantity `json:"quantity"`
		When            metav1.Time       `json:"when,omitempty"`
		Phase           phase             `json:"phase,omitempty"`
		AsString        int64             `json:"asString,string,omitempty"`
		Anything        any               `json:"anything,omitempty"`
		Skipped         string            `json:"-"`
		unexported      string
	}
	Embedded struct {
		Inlined string `json:"inlined,omitempty"`
	}
	sampleItem struct {
		Key string `json:"key"`
	}
	phase string
)

func (sampleObject) SwaggerDoc() map[string]string {
	return map[string]string{"": "A sample.", "name": "The name."}
}

func TestTypeDefinitions(t *testing.T) {
	ref := func(name string) spec.Ref { return spec.MustCreateRef("#/definitions/" + name) }
	defs := map[string]common.OpenAPIDefinition{
		metav1.Time{}.OpenAPIModelName():       {},
		resource.Quantity{}.OpenAPIModelName(): {},
	}
	_ = sampleObject{unexported: "not a property"}
	addTypeDefinitions(defs, []reflect.Type{reflect.TypeFor[*sampleObject]()}, ref)
	objName := modelName(reflect.TypeFor[sampleObject]())
	itemName := modelName(reflect.TypeFor[sampleItem]())
	if len(defs) != 4 {
		t.Fatalf("definitions %v", keys(defs))
	}
	obj := defs[objName]
	s := obj.Schema
	if s.Description != "A sample." || !slices.Equal(s.Type, []string{"object"}) {
		t.Errorf("schema %+v", s.SchemaProps)
	}
	if want := []string{"name", "flag", "item", "quantity"}; !slices.Equal(s.Required, want) {
		t.Errorf("required %v, want %v", s.Required, want)
	}
	if want := []string{metav1.Time{}.OpenAPIModelName(), itemName, resource.Quantity{}.OpenAPIModelName()}; !sameSet(obj.Dependencies, want) {
		t.Errorf("dependencies %v, want %v", obj.Dependencies, want)
	}
	props := map[string]string{}
	for name, p := range s.Properties {
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		props[name] = string(b)
	}
	want := map[string]string{
		"apiVersion": `{"description":"` + metav1.TypeMeta{}.SwaggerDoc()["apiVersion"] + `","type":"string"}`,
		"kind":       `{"description":"` + metav1.TypeMeta{}.SwaggerDoc()["kind"] + `","type":"string"}`,
		"inlined":    `{"type":"string"}`,
		"name":       `{"description":"The name.","type":"string","default":""}`,
		"count":      `{"type":"integer","format":"int32"}`,
		"size":       `{"type":"integer","format":"int64"}`,
		"ratio":      `{"type":"number","format":"double"}`,
		"flag":       `{"type":"boolean","default":false}`,
		"raw":        `{"type":"string","format":"byte"}`,
		"labels":     `{"type":"object","additionalProperties":{"type":"string"}}`,
		"items":      `{"type":"array","items":{"$ref":"#/definitions/` + itemName + `"},"x-kubernetes-patch-merge-key":"key","x-kubernetes-patch-strategy":"merge"}`,
		"item":       `{"default":{},"$ref":"#/definitions/` + itemName + `"}`,
		"quantity":   `{"$ref":"#/definitions/io.k8s.apimachinery.pkg.api.resource.Quantity"}`,
		"when":       `{"$ref":"#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.Time"}`,
		"phase":      `{"type":"string"}`,
		"asString":   `{"type":"string"}`,
		"anything":   `{}`,
	}
	for name, w := range want {
		if props[name] != w {
			t.Errorf("%s: %s, want %s", name, props[name], w)
		}
	}
	for name := range props {
		if _, ok := want[name]; !ok {
			t.Errorf("unexpected property %s", name)
		}
	}
	if item := defs[itemName].Schema; !slices.Equal(item.Required, []string{"key"}) {
		t.Errorf("item: %+v", item.SchemaProps)
	}
}
