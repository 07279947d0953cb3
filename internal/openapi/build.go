package openapi

import (
	"reflect"
	"strings"
	"sync"

	restful "github.com/emicklei/go-restful/v3"
	generatedopenapi "k8s.io/apiextensions-apiserver/pkg/generated/openapi"
	"k8s.io/apimachinery/pkg/runtime/schema"
	openapinamer "k8s.io/apiserver/pkg/endpoints/openapi"
	utilopenapi "k8s.io/apiserver/pkg/util/openapi"
	aggregatoropenapi "k8s.io/kube-aggregator/pkg/generated/openapi"
	"k8s.io/kube-openapi/pkg/builder"
	"k8s.io/kube-openapi/pkg/builder3"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/common/restfuladapter"
	"k8s.io/kube-openapi/pkg/handler"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// kubernetesVersion is info.version of the built-in documents: the
// Kubernetes minor release crdserver behaves as, written as
// kube-apiserver writes it (its effective version, "1.37").
const kubernetesVersion = "1.37"

// builtV3 are the built-in documents built so far in this process, by
// key: every server in a process (tests start many) serves the same
// built-in types, and building a document is most of what the first
// /openapi/v3 request of a server costs. The documents are never changed
// once built (merging with CRDs' copies them).
var builtV3 sync.Map // builtinDocument.key → *spec3.OpenAPI

// buildBuiltinV3 builds the OpenAPI v3 document of one built-in
// document, or takes the one built for the same key before.
func buildBuiltinV3(d builtinDocument) (*spec3.OpenAPI, error) {
	if doc, ok := builtV3.Load(d.key); ok {
		return doc.(*spec3.OpenAPI), nil
	}
	doc, err := buildV3(d.path, d.service())
	if err != nil {
		return nil, err
	}
	actual, _ := builtV3.LoadOrStore(d.key, doc)
	return actual.(*spec3.OpenAPI), nil
}

// buildV3 builds the OpenAPI v3 document of one built-in service.
func buildV3(path string, s service) (*spec3.OpenAPI, error) {
	doc, err := builder3.BuildOpenAPISpecFromRoutes(restfuladapter.AdaptWebServices([]*restful.WebService{s.ws}), v3Config(s.roots))
	if err != nil {
		return nil, err
	}
	if gv, ok := groupVersionOf(path); ok {
		narrowMetaGVKs(doc, gv)
	}
	return doc, nil
}

// buildBuiltinV2 builds the OpenAPI v2 document of all the built-in
// documents, without defaults, as CRD documents are merged into it.
func buildBuiltinV2(docs []builtinDocument) (*spec.Swagger, error) {
	var (
		wss   []*restful.WebService
		roots []reflect.Type
	)
	for _, d := range docs {
		s := d.service()
		wss = append(wss, s.ws)
		roots = append(roots, s.roots...)
	}
	doc, err := builder.BuildOpenAPISpecFromRoutes(restfuladapter.AdaptWebServices(wss), v2Config(roots))
	if err != nil {
		return nil, err
	}
	doc.Definitions = handler.PruneDefaults(doc.Definitions)
	return doc, nil
}

// groupVersionOf parses "api/v1" and "apis/<group>/<version>".
func groupVersionOf(path string) (schema.GroupVersion, bool) {
	parts := strings.Split(path, "/")
	switch {
	case len(parts) == 2 && parts[0] == "api":
		return schema.GroupVersion{Version: parts[1]}, true
	case len(parts) == 3 && parts[0] == "apis":
		return schema.GroupVersion{Group: parts[1], Version: parts[2]}, true
	}
	return schema.GroupVersion{}, false
}

// narrowMetaGVKs keeps, on the meta types every group registers
// (WatchEvent, DeleteOptions), only the group/version kinds of the
// document's own group/version and of core/v1, as kube-apiserver does in
// its per-group/version documents.
func narrowMetaGVKs(doc *spec3.OpenAPI, gv schema.GroupVersion) {
	if doc.Components == nil {
		return
	}
	for _, s := range doc.Components.Schemas {
		gvks, ok := s.Extensions[extensionGVK].([]any)
		if !ok || len(gvks) < 2 {
			continue
		}
		if first, _ := gvks[0].(map[string]any); first["kind"] != "WatchEvent" && first["kind"] != "DeleteOptions" {
			continue
		}
		var kept []any
		for _, item := range gvks {
			m, _ := item.(map[string]any)
			g, v := m["group"], m["version"]
			if (g == gv.Group && v == gv.Version) || (g == "" && v == "v1") {
				kept = append(kept, item)
			}
		}
		if len(kept) == 0 {
			delete(s.Extensions, extensionGVK)
			continue
		}
		s.Extensions[extensionGVK] = kept
	}
}

const extensionGVK = "x-kubernetes-group-version-kind"

// v3Config and v2Config are kube-apiserver's OpenAPI configurations:
// title, bearer token security, the 401 response on every operation,
// operation IDs and tags, and definition names with their group/version
// kinds. Each build gets its own: the builders modify them.
// The definitions are those of the root types and what they reach.
func v3Config(roots []reflect.Type) *common.OpenAPIV3Config {
	return &common.OpenAPIV3Config{
		Info:            info(),
		DefaultResponse: &spec3.Response{ResponseProps: spec3.ResponseProps{Description: "Default Response."}},
		CommonResponses: map[int]*spec3.Response{401: {ResponseProps: spec3.ResponseProps{Description: "Unauthorized"}}},
		SecuritySchemes: spec3.SecuritySchemes{"BearerToken": &spec3.SecurityScheme{SecuritySchemeProps: spec3.SecuritySchemeProps{
			Type:        "apiKey",
			Name:        "authorization",
			In:          "header",
			Description: "Bearer Token authentication",
		}}},
		DefaultSecurity:       []map[string][]string{{"BearerToken": {}}},
		GetOperationIDAndTags: openapinamer.GetOperationIDAndTags, //nolint:staticcheck // as k8s.io/apiserver's DefaultOpenAPIConfig sets it
		GetDefinitionName:     namer().GetDefinitionName,
		GetDefinitions:        definitions(roots),
	}
}

func v2Config(roots []reflect.Type) *common.Config {
	return &common.Config{
		ProtocolList:    []string{"https"},
		Info:            info(),
		DefaultResponse: &spec.Response{ResponseProps: spec.ResponseProps{Description: "Default Response."}},
		CommonResponses: map[int]spec.Response{401: {ResponseProps: spec.ResponseProps{Description: "Unauthorized"}}},
		SecurityDefinitions: &spec.SecurityDefinitions{"BearerToken": &spec.SecurityScheme{SecuritySchemeProps: spec.SecuritySchemeProps{
			Type:        "apiKey",
			Name:        "authorization",
			In:          "header",
			Description: "Bearer Token authentication",
		}}},
		DefaultSecurity:       []map[string][]string{{"BearerToken": {}}},
		GetOperationIDAndTags: openapinamer.GetOperationIDAndTags, //nolint:staticcheck // as k8s.io/apiserver's DefaultOpenAPIConfig sets it
		GetDefinitionName:     namer().GetDefinitionName,
		GetDefinitions:        definitions(roots),
	}
}

func info() *spec.Info {
	return &spec.Info{InfoProps: spec.InfoProps{Title: "Kubernetes", Version: kubernetesVersion}}
}

// definitions returns the schemas of the built-in types: the meta and
// apiextensions types from apiextensions-apiserver's generated
// definitions, the apiregistration types from kube-aggregator's, the k8s.io/api types reachable from roots made by
// reflection (typed.go); without what disabled features add.
func definitions(roots []reflect.Type) common.GetOpenAPIDefinitions {
	return utilopenapi.GetOpenAPIDefinitionsWithoutDisabledFeatures(func(ref common.ReferenceCallback) map[string]common.OpenAPIDefinition {
		defs := generatedopenapi.GetOpenAPIDefinitions(ref)
		for name, def := range aggregatoropenapi.GetOpenAPIDefinitions(ref) {
			if _, ok := defs[name]; !ok {
				defs[name] = def
			}
		}
		addTypeDefinitions(defs, roots, ref)
		return defs
	})
}
