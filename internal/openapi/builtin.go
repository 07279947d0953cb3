package openapi

import (
	"strings"
	"sync"

	restful "github.com/emicklei/go-restful/v3"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	generatedopenapi "k8s.io/apiextensions-apiserver/pkg/generated/openapi"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/version"
	openapinamer "k8s.io/apiserver/pkg/endpoints/openapi"
	utilopenapi "k8s.io/apiserver/pkg/util/openapi"
	"k8s.io/kube-openapi/pkg/builder"
	"k8s.io/kube-openapi/pkg/builder3"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/common/restfuladapter"
	"k8s.io/kube-openapi/pkg/handler"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// kubernetesVersion is info.version of the built-in documents: the
// Kubernetes release crdserver behaves as.
const kubernetesVersion = "v1.37.0"

var (
	coreV1          = corev1.SchemeGroupVersion
	apiextensionsV1 = apiextensionsv1.SchemeGroupVersion
)

// The built-in resources, with what crdserver serves for them.
var (
	namespaces = apiResource{
		plural: "namespaces",
		kind:   "Namespace",
		object: corev1.Namespace{},
		list:   corev1.NamespaceList{},
		patchTypes: []string{
			string(types.JSONPatchType),
			string(types.MergePatchType),
			string(types.StrategicMergePatchType),
			string(types.ApplyYAMLPatchType),
		},
		subresources: []subresource{{name: "status", readable: true}, {name: "finalize"}},
	}
	customResourceDefinitions = apiResource{
		plural: "customresourcedefinitions",
		kind:   "CustomResourceDefinition",
		object: apiextensionsv1.CustomResourceDefinition{},
		list:   apiextensionsv1.CustomResourceDefinitionList{},
		// crdserver has no strategic merge patch for CRDs, so kubectl must
		// not be told it has.
		patchTypes: []string{
			string(types.JSONPatchType),
			string(types.MergePatchType),
			string(types.ApplyYAMLPatchType),
		},
		deleteCollection: true,
		subresources:     []subresource{{name: "status", readable: true}},
	}
)

// webServices describes the built-in APIs as go-restful web services, one
// per OpenAPI v3 document: api, api/v1, apis,
// apis/apiextensions.k8s.io, apis/apiextensions.k8s.io/v1 and version.
func webServices() []*restful.WebService {
	core := resourceWebService("/api/v1", coreV1)
	addResourceRoutes(core, coreV1, namespaces)
	addGetRoute(core, "get available resources", "getAPIResources", mediaTypes, metav1.APIResourceList{})

	ext := resourceWebService("/apis/apiextensions.k8s.io/v1", apiextensionsV1)
	addResourceRoutes(ext, apiextensionsV1, customResourceDefinitions)
	addGetRoute(ext, "get available resources", "getAPIResources", mediaTypes, metav1.APIResourceList{})

	api := discoveryWebService("/api", "get available API versions")
	addGetRoute(api, "get available API versions", "getAPIVersions", mediaTypes, metav1.APIVersions{})
	apis := discoveryWebService("/apis", "get available API versions")
	addGetRoute(apis, "get available API versions", "getAPIVersions", mediaTypes, metav1.APIGroupList{})
	group := discoveryWebService("/apis/apiextensions.k8s.io", "get information of a group")
	addGetRoute(group, "get information of a group", "getAPIGroup", mediaTypes, metav1.APIGroup{})
	ver := discoveryWebService("/version", "get the version information for this server.")
	addGetRoute(ver, "get the version information for this server", "getCodeVersion", []string{restful.MIME_JSON}, version.Info{})

	return []*restful.WebService{api, core, apis, group, ext, ver}
}

// resourceWebService is the web service of a group/version's resources.
func resourceWebService(root string, gv schema.GroupVersion) *restful.WebService {
	ws := new(restful.WebService)
	ws.Path(root)
	ws.Doc("API at " + root)
	ws.Consumes("*/*")
	ws.Produces(allMediaTypes...)
	ws.ApiVersion(gv.String())
	return ws
}

func discoveryWebService(root, doc string) *restful.WebService {
	ws := new(restful.WebService)
	ws.Path(root)
	ws.Doc(doc)
	return ws
}

// buildBuiltinV3 builds the OpenAPI v3 document of one built-in web
// service.
func buildBuiltinV3(ws *restful.WebService) (*spec3.OpenAPI, error) {
	doc, err := builder3.BuildOpenAPISpecFromRoutes(restfuladapter.AdaptWebServices([]*restful.WebService{ws}), v3Config())
	if err != nil {
		return nil, err
	}
	if gv, ok := groupVersionOf(documentPath(ws)); ok {
		narrowMetaGVKs(doc, gv)
	}
	return doc, nil
}

// buildBuiltinV2 builds the OpenAPI v2 document of the built-in APIs,
// without defaults, as CRD documents are merged into it.
func buildBuiltinV2(wss []*restful.WebService) (*spec.Swagger, error) {
	doc, err := builder.BuildOpenAPISpecFromRoutes(restfuladapter.AdaptWebServices(wss), v2Config())
	if err != nil {
		return nil, err
	}
	doc.Definitions = handler.PruneDefaults(doc.Definitions)
	return doc, nil
}

// documentPath is the OpenAPI v3 path of a web service's document:
// "api/v1" for /api/v1.
func documentPath(ws *restful.WebService) string {
	return strings.TrimPrefix(ws.RootPath(), "/")
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
func v3Config() *common.OpenAPIV3Config {
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
		GetDefinitions:        definitions,
	}
}

func v2Config() *common.Config {
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
		GetDefinitions:        definitions,
	}
}

func info() *spec.Info {
	return &spec.Info{InfoProps: spec.InfoProps{Title: "Kubernetes", Version: kubernetesVersion}}
}

// definitions are the schemas of the built-in types: apiextensions and
// meta types from the apiextensions-apiserver's generated definitions,
// Namespace types of our own; without what disabled features add.
var definitions = utilopenapi.GetOpenAPIDefinitionsWithoutDisabledFeatures(func(ref common.ReferenceCallback) map[string]common.OpenAPIDefinition {
	defs := generatedopenapi.GetOpenAPIDefinitions(ref)
	for name, def := range namespaceDefinitions(ref) {
		defs[name] = def
	}
	return defs
})

// namer names definitions and lists the group/version kinds of each, from
// a scheme of the built-in groups.
var namer = sync.OnceValue(func() *openapinamer.DefinitionNamer {
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		panic(err)
	}
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		panic(err)
	}
	return openapinamer.NewDefinitionNamer(scheme)
})
