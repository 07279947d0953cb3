package openapi

import (
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"sync"

	restful "github.com/emicklei/go-restful/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/version"

	"github.com/crdserver/crdserver/internal/resource"
)

// builtinDocument is one built-in OpenAPI v3 document: its path
// ("api/v1") and its web service, made when first asked for, with the Go
// types its definitions start from. key is everything the service is made
// from: two documents of one key are the same document.
type builtinDocument struct {
	path    string
	key     string
	service func() service
}

// service is the web service of a document and the root types of its
// definitions (the objects, lists and subresource kinds of its
// resources).
type service struct {
	ws    *restful.WebService
	roots []reflect.Type
}

// builtinDocuments lays the built-in resources out as kube-apiserver
// does, one document per API path: api, api/v1, apis, then apis/<group>
// and apis/<group>/<version> of every group in the order of builtins
// (versions in each resource's order), and version.
func builtinDocuments(builtins []*resource.Resource) []builtinDocument {
	var (
		versions = map[schema.GroupVersion][]*resource.Resource{}
		order    []schema.GroupVersion
		groups   []string
	)
	for _, r := range builtins {
		for _, v := range r.Versions {
			gv := schema.GroupVersion{Group: r.Group, Version: v.Name}
			if _, ok := versions[gv]; !ok {
				order = append(order, gv)
			}
			if r.Group != "" && !slices.Contains(groups, r.Group) {
				groups = append(groups, r.Group)
			}
			versions[gv] = append(versions[gv], r)
		}
	}

	docs := []builtinDocument{discoveryDocument("/api", "get available API versions", "getAPIVersions", mediaTypes, metav1.APIVersions{})}
	resourceDocs := func(group string) {
		for _, gv := range order {
			if gv.Group == group {
				docs = append(docs, resourceDocument(gv, versions[gv]))
			}
		}
	}
	resourceDocs("")
	docs = append(docs, discoveryDocument("/apis", "get available API versions", "getAPIVersions", mediaTypes, metav1.APIGroupList{}))
	for _, g := range groups {
		docs = append(docs, discoveryDocument("/apis/"+g, "get information of a group", "getAPIGroup", mediaTypes, metav1.APIGroup{}))
		resourceDocs(g)
	}
	return append(docs, discoveryDocument("/version", "get the version information for this server", "getCodeVersion", []string{restful.MIME_JSON}, version.Info{}))
}

// resourceDocument is the document of the resources of one group/version.
func resourceDocument(gv schema.GroupVersion, resources []*resource.Resource) builtinDocument {
	root := "/apis/" + gv.String()
	if gv.Group == "" {
		root = "/api/" + gv.Version
	}
	return builtinDocument{path: strings.TrimPrefix(root, "/"), key: resourceDocumentKey(root, gv, resources), service: sync.OnceValue(func() service {
		ws := new(restful.WebService)
		ws.Path(root)
		ws.Doc("API at " + root)
		ws.Consumes("*/*")
		ws.Produces(allMediaTypes...)
		ws.ApiVersion(gv.String())
		var roots []reflect.Type
		for _, r := range resources {
			api, err := newAPIResource(r, r.Version(gv.Version))
			if err != nil {
				slog.Warn("openapi: leaving a built-in resource out", "resource", r.String(), "version", gv.Version, "err", err)
				continue
			}
			addResourceRoutes(ws, api)
			roots = append(roots, api.types()...)
		}
		addGetRoute(ws, "get available resources", "getAPIResources", mediaTypes, metav1.APIResourceList{})
		return service{ws: ws, roots: roots}
	})}
}

// discoveryDocument is the document of a discovery endpoint: one GET.
func discoveryDocument(root, doc, operation string, produces []string, body any) builtinDocument {
	key := fmt.Sprintf("%s|%s|%s|%q|%T", root, doc, operation, produces, body)
	return builtinDocument{path: strings.TrimPrefix(root, "/"), key: key, service: sync.OnceValue(func() service {
		ws := new(restful.WebService)
		ws.Path(root)
		ws.Doc(doc)
		addGetRoute(ws, doc, operation, produces, body)
		return service{ws: ws}
	})}
}

// resourceDocumentKey is everything of resources that resourceDocument
// and newAPIResource make the document of gv from.
func resourceDocumentKey(root string, gv schema.GroupVersion, resources []*resource.Resource) string {
	var b strings.Builder
	b.WriteString(root)
	for _, r := range resources {
		_, finalize := r.Strategy.(resource.FinalizeStrategy)
		status := false
		if v := r.Version(gv.Version); v != nil {
			status = v.Status
		}
		fmt.Fprintf(&b, "\n%s %s %s %s %v %q %v %v %v", r.Group, r.Plural, r.Kind, r.ListKind, r.Namespaced, r.Verbs,
			r.StrategicMergeType != nil, status, finalize)
		for _, s := range r.Subresources {
			fmt.Fprintf(&b, " [%s %q %s/%s %s]", s.Name, s.Verbs, s.Group, s.Version, s.Kind)
		}
	}
	return b.String()
}

// newAPIResource describes r in version v: its Go types come from the
// scheme of the built-in groups.
func newAPIResource(r *resource.Resource, v *resource.Version) (apiResource, error) {
	gv := schema.GroupVersion{Group: r.Group, Version: v.Name}
	api := apiResource{
		plural:     r.Plural,
		kind:       r.Kind,
		namespaced: r.Namespaced,
		gvk:        gv.WithKind(r.Kind),
		verbs:      r.Verbs,
		patchTypes: []string{string(types.JSONPatchType), string(types.MergePatchType)},
	}
	if r.StrategicMergeType != nil {
		api.patchTypes = append(api.patchTypes, string(types.StrategicMergePatchType))
	}
	// CBOR is off by default in kube-apiserver, and so is apply-patch+cbor.
	api.patchTypes = append(api.patchTypes, string(types.ApplyYAMLPatchType))

	var err error
	if api.object, err = sample(api.gvk); err != nil {
		return apiResource{}, err
	}
	if slices.Contains(r.Verbs, "list") {
		listKind := r.ListKind
		if listKind == "" {
			listKind = r.Kind + "List"
		}
		if api.list, err = sample(gv.WithKind(listKind)); err != nil {
			return apiResource{}, err
		}
	}
	if v.Status {
		api.subresources = append(api.subresources, subresource{name: "status", verbs: []string{"get", "update", "patch"}})
	}
	if _, ok := r.Strategy.(resource.FinalizeStrategy); ok {
		api.subresources = append(api.subresources, subresource{name: "finalize", verbs: []string{"update"}})
	}
	for _, s := range r.Subresources {
		sub := subresource{name: s.Name, verbs: s.Verbs}
		if s.Kind != "" {
			sub.gvk = schema.GroupVersionKind{Group: s.Group, Version: s.Version, Kind: s.Kind}
			if sub.object, err = sample(sub.gvk); err != nil {
				return apiResource{}, fmt.Errorf("subresource %s: %w", s.Name, err)
			}
		}
		api.subresources = append(api.subresources, sub)
	}
	return api, nil
}

// sample is a zero value (not a pointer) of the Go type of gvk.
func sample(gvk schema.GroupVersionKind) (any, error) {
	obj, err := builtinScheme().New(gvk)
	if err != nil {
		return nil, err
	}
	return reflect.ValueOf(obj).Elem().Interface(), nil
}

// types are the Go types of the resource: its object, list and what its
// subresources take.
func (r apiResource) types() []reflect.Type {
	out := []reflect.Type{reflect.TypeOf(r.object)}
	if r.list != nil {
		out = append(out, reflect.TypeOf(r.list))
	}
	for _, s := range r.subresources {
		if s.object != nil {
			out = append(out, reflect.TypeOf(s.object))
		}
	}
	return out
}
