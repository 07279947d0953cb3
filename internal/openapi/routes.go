package openapi

import (
	"net/http"
	"slices"
	"strings"

	restful "github.com/emicklei/go-restful/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/endpoints"
)

// The media types kube-apiserver's built-in groups produce (CBOR is off by
// default), and the watch stream forms of those that stream.
var (
	mediaTypes    = []string{"application/json", "application/yaml", "application/vnd.kubernetes.protobuf"}
	allMediaTypes = append(append([]string(nil), mediaTypes...),
		"application/json;stream=watch", "application/vnd.kubernetes.protobuf;stream=watch")
)

const prettyDoc = "If 'true', then the output is pretty printed. Defaults to 'false' unless the user-agent indicates a browser or command-line HTTP tool (curl and wget)."

// apiResource is one built-in resource in one version, as its routes
// describe it.
type apiResource struct {
	plural     string
	kind       string
	namespaced bool
	// gvk is the group/version kind of the resource's objects.
	gvk schema.GroupVersionKind
	// object and list are samples of the Go types (values, not pointers):
	// their OpenAPI model names name the schemas. list is nil when the
	// resource cannot be listed.
	object, list any
	// verbs are the resource's verbs (get, list, watch, create, update,
	// patch, delete, deletecollection); each has its routes.
	verbs []string
	// patchTypes are the content types PATCH accepts.
	patchTypes   []string
	subresources []subresource
}

// subresource is a subresource of a resource, with the verbs it answers
// (get, update, patch, create) and what it reads and writes.
type subresource struct {
	name  string
	verbs []string
	// gvk and object are the kind and a sample of what the subresource
	// takes and returns; object nil means the resource's own.
	gvk    schema.GroupVersionKind
	object any
}

// action is one route to publish, named by the verb kube-apiserver's
// installer gives it (k8s.io/apiserver/pkg/endpoints/request).
type action struct {
	verb          string // LIST, POST, DELETECOLLECTION, WATCHLIST, GET, PUT, PATCH, DELETE, WATCH
	path          string // relative to the web service root
	params        []*restful.Parameter
	allNamespaces bool
	sub           *subresource
}

// addResourceRoutes adds the routes of r to ws, a web service rooted at
// /api/v1 or /apis/<group>/<version>, the way kube-apiserver's API
// installer lays them out.
func addResourceRoutes(ws *restful.WebService, r apiResource) {
	for _, a := range r.actions(ws) {
		gvk := r.gvk
		if a.sub != nil && a.sub.object != nil {
			gvk = a.sub.gvk
		}
		route := r.route(ws, a)
		route.Metadata(endpoints.RouteMetaGVK, metav1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind})
		route.Metadata(endpoints.RouteMetaAction, strings.ToLower(a.verb))
		ws.Route(route)
	}
}

// actions lists the routes of the resource and of its subresources, in
// the installer's order.
func (r apiResource) actions(ws *restful.WebService) []action {
	nameParam := ws.PathParameter("name", "name of the "+r.kind).DataType("string")
	var scope []*restful.Parameter
	collection := r.plural
	if r.namespaced {
		scope = []*restful.Parameter{ws.PathParameter("namespace", "object name and auth scope, such as for teams and projects").DataType("string")}
		collection = "namespaces/{namespace}/" + r.plural
	}
	item := collection + "/{name}"
	named := append(append([]*restful.Parameter(nil), scope...), nameParam)

	var acts []action
	add := func(ok bool, a action) {
		if ok {
			acts = append(acts, a)
		}
	}
	can := func(verb string) bool { return slices.Contains(r.verbs, verb) }
	watchList := can("watch") && can("list")
	add(can("list"), action{verb: "LIST", path: collection, params: scope})
	add(can("create"), action{verb: "POST", path: collection, params: scope})
	add(can("deletecollection"), action{verb: "DELETECOLLECTION", path: collection, params: scope})
	add(watchList, action{verb: "WATCHLIST", path: "watch/" + collection, params: scope})
	add(can("get"), action{verb: "GET", path: item, params: named})
	add(can("update"), action{verb: "PUT", path: item, params: named})
	add(can("patch"), action{verb: "PATCH", path: item, params: named})
	add(can("delete"), action{verb: "DELETE", path: item, params: named})
	add(can("watch"), action{verb: "WATCH", path: "watch/" + item, params: named})
	if r.namespaced {
		add(can("list"), action{verb: "LIST", path: r.plural, allNamespaces: true})
		add(watchList, action{verb: "WATCHLIST", path: "watch/" + r.plural, allNamespaces: true})
	}
	for i := range r.subresources {
		s := &r.subresources[i]
		params := named
		if s.object != nil {
			// The installer names the name after the subresource's kind.
			params = append(append([]*restful.Parameter(nil), scope...), ws.PathParameter("name", "name of the "+s.gvk.Kind).DataType("string"))
		}
		path := item + "/" + s.name
		for _, v := range []struct{ verb, action string }{{"create", "POST"}, {"get", "GET"}, {"update", "PUT"}, {"patch", "PATCH"}} {
			add(slices.Contains(s.verbs, v.verb), action{verb: v.action, path: path, params: params, sub: s})
		}
	}
	return acts
}

// route builds the route of one action: documentation, operation name,
// media types, request and response types and query parameters.
func (r apiResource) route(ws *restful.WebService, a action) *restful.RouteBuilder {
	// Operation names: verb + Namespaced + Kind + Subresource + suffix.
	namespaced, suffix := "", ""
	if r.namespaced {
		namespaced = "Namespaced"
	}
	if a.allNamespaces {
		namespaced, suffix = "", "ForAllNamespaces"
	}
	sub := ""
	// of is " <sub> of" for a subresource route, as in "read status of".
	of := ""
	object := r.object
	if a.sub != nil {
		sub = strings.ToUpper(a.sub.name[:1]) + a.sub.name[1:]
		of = " " + a.sub.name + " of"
		if a.sub.object != nil {
			object = a.sub.object
		}
	}
	op := func(verb string) string { return verb + namespaced + r.kind + sub + suffix }
	article := endpoints.GetArticleForNoun(r.kind, " ")
	status := metav1.Status{}
	watchEvent := metav1.WatchEvent{}

	var route *restful.RouteBuilder
	switch a.verb {
	case "GET":
		route = ws.GET(a.path).
			Doc("read"+of+" the specified "+r.kind).
			Operation(op("read")).
			Produces(mediaTypes...).
			Returns(http.StatusOK, "OK", object).
			Writes(object)
	case "LIST":
		route = ws.GET(a.path).
			Doc("list or watch objects of kind "+r.kind).
			Operation(op("list")).
			Produces(allMediaTypes...).
			Returns(http.StatusOK, "OK", r.list).
			Writes(r.list)
		addParams(ws, route, &metav1.ListOptions{})
	case "PUT":
		route = ws.PUT(a.path).
			Doc("replace"+of+" the specified "+r.kind).
			Operation(op("replace")).
			Produces(mediaTypes...).
			Returns(http.StatusOK, "OK", object).
			Returns(http.StatusCreated, "Created", object).
			Reads(object).
			Writes(object)
		addParams(ws, route, &metav1.UpdateOptions{})
	case "PATCH":
		route = ws.PATCH(a.path).
			Doc("partially update"+of+" the specified "+r.kind).
			Consumes(r.patchTypes...).
			Operation(op("patch")).
			Produces(mediaTypes...).
			Returns(http.StatusOK, "OK", object).
			Returns(http.StatusCreated, "Created", object).
			Reads(metav1.Patch{}).
			Writes(object)
		addParams(ws, route, &metav1.PatchOptions{})
	case "POST":
		route = ws.POST(a.path).
			Doc("create"+of+article+r.kind).
			Operation(op("create")).
			Produces(mediaTypes...).
			Returns(http.StatusOK, "OK", object).
			Returns(http.StatusCreated, "Created", object).
			Returns(http.StatusAccepted, "Accepted", object).
			Reads(object).
			Writes(object)
		addParams(ws, route, &metav1.CreateOptions{})
	case "DELETE":
		route = ws.DELETE(a.path).
			Doc("delete"+of+article+r.kind).
			Operation(op("delete")).
			Produces(mediaTypes...).
			Writes(status).
			Returns(http.StatusOK, "OK", status).
			Returns(http.StatusAccepted, "Accepted", status).
			Reads(metav1.DeleteOptions{})
		route.ParameterNamed("body").Required(false)
		addParams(ws, route, &metav1.DeleteOptions{})
	case "DELETECOLLECTION":
		route = ws.DELETE(a.path).
			Doc("delete collection of "+r.kind).
			Operation(op("deletecollection")).
			Produces(mediaTypes...).
			Writes(status).
			Returns(http.StatusOK, "OK", status).
			Reads(metav1.DeleteOptions{})
		route.ParameterNamed("body").Required(false)
		addParams(ws, route, &metav1.DeleteOptions{})
		addParams(ws, route, &metav1.ListOptions{}, "watch", "allowWatchBookmarks")
	case "WATCH":
		route = ws.GET(a.path).
			Doc("watch changes to an object of kind "+r.kind+". deprecated: use the 'watch' parameter with a list operation instead, filtered to a single item with the 'fieldSelector' parameter.").
			Operation(op("watch")).
			Produces(allMediaTypes...).
			Returns(http.StatusOK, "OK", watchEvent).
			Writes(watchEvent)
		addParams(ws, route, &metav1.ListOptions{})
	case "WATCHLIST":
		route = ws.GET(a.path).
			Doc("watch individual changes to a list of "+r.kind+". deprecated: use the 'watch' parameter with a list operation instead.").
			Operation("watch"+namespaced+r.kind+sub+"List"+suffix).
			Produces(allMediaTypes...).
			Returns(http.StatusOK, "OK", watchEvent).
			Writes(watchEvent)
		addParams(ws, route, &metav1.ListOptions{})
	default:
		panic("openapi: unknown action " + a.verb)
	}
	route.To(noop).Param(ws.QueryParameter("pretty", prettyDoc))
	for _, p := range a.params {
		route.Param(p)
	}
	return route
}

// addParams adds the fields of a metav1 options struct as query
// parameters, as kube-apiserver does.
func addParams(ws *restful.WebService, route *restful.RouteBuilder, options any, excluded ...string) {
	if err := endpoints.AddObjectParams(ws, route, options, excluded...); err != nil {
		panic("openapi: " + err.Error()) // options are pointers to structs
	}
}

// noop is the handler of every route: the routes are only described, the
// requests are served elsewhere.
func noop(*restful.Request, *restful.Response) {}

// addGetRoute adds the single GET "/" route of a discovery web service.
func addGetRoute(ws *restful.WebService, doc, operation string, produces []string, sample any) {
	ws.Route(ws.GET("/").To(noop).
		Doc(doc).
		Operation(operation).
		Produces(produces...).
		Consumes(produces...).
		Writes(sample))
}
