package request

import (
	"context"
	"net/http"
	"net/url"
	"strings"

	"k8s.io/apimachinery/pkg/api/validate/content"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metainternalversionscheme "k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Info is what a request asks for, parsed from its method and path the way
// kube-apiserver's RequestInfoFactory parses it.
type Info struct {
	// IsResourceRequest is false for discovery, health, metrics and other
	// non-resource paths.
	IsResourceRequest bool
	Path              string
	// APIPrefix is "api" (core group) or "apis".
	APIPrefix string
	Group     string
	Version   string
	Namespace string
	Resource  string
	// Name is the object's name from the path or, for a list or watch
	// whose field selector requires metadata.name to be one name, that
	// name: Kubernetes authorizes such a request as one for the object.
	Name        string
	Subresource string
	// Verb is the Kubernetes verb: get, list, watch, create, update, patch,
	// delete, deletecollection; for non-resource requests the lower-cased
	// HTTP method.
	Verb string
	// NamespaceIsObject is true when the path names a namespace object
	// itself (/api/v1/namespaces/<name>[/<subresource>]): Namespace then
	// holds its name, as Kubernetes' RequestInfo sets it (and authorizes
	// it).
	NamespaceIsObject bool
	// Extra is true when the path has more segments than a resource path
	// can have.
	Extra bool
	// Deprecated is set by the handler when the request is for a
	// deprecated API version (metrics and audit report it).
	Deprecated bool
}

// namespaceSubresources are the subresources of the namespace object
// itself, so /api/v1/namespaces/x/status is not a resource "status" in x.
var namespaceSubresources = map[string]bool{"status": true, "finalize": true}

// Parse reads the request info of r.
func Parse(r *http.Request) *Info {
	info := &Info{Path: r.URL.Path, Verb: strings.ToLower(r.Method)}
	parts := splitPath(r.URL.Path)
	if len(parts) < 2 {
		return info
	}
	switch parts[0] {
	case "api":
		info.APIPrefix = "api"
		info.Version = parts[1]
		parts = parts[2:]
	case "apis":
		if len(parts) < 3 {
			return info
		}
		info.APIPrefix = "apis"
		info.Group = parts[1]
		info.Version = parts[2]
		parts = parts[3:]
	default:
		return info
	}
	if len(parts) == 0 {
		return info
	}
	info.IsResourceRequest = true
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		info.Verb = "get"
	case http.MethodPost:
		info.Verb = "create"
	case http.MethodPut:
		info.Verb = "update"
	case http.MethodPatch:
		info.Verb = "patch"
	case http.MethodDelete:
		info.Verb = "delete"
	default:
		info.Verb = ""
	}
	// The deprecated /watch/ prefix.
	if parts[0] == "watch" {
		if info.Verb == "get" {
			info.Verb = "watch"
		}
		parts = parts[1:]
		if len(parts) == 0 {
			info.IsResourceRequest = false
			return info
		}
	}
	if parts[0] == "namespaces" {
		if len(parts) > 1 {
			info.Namespace = parts[1]
			if len(parts) > 2 && !namespaceSubresources[parts[2]] {
				parts = parts[2:]
			} else {
				info.NamespaceIsObject = true
			}
		}
	}
	info.Resource = parts[0]
	if len(parts) > 1 {
		info.Name = parts[1]
	}
	if len(parts) > 2 {
		info.Subresource = parts[2]
	}
	if len(parts) > 3 {
		info.Extra = true
	}
	if info.Name == "" {
		switch info.Verb {
		case "get":
			info.Verb, info.Name = listVerbAndName(r.URL.Query())
		case "delete":
			info.Verb = "deletecollection"
		}
	}
	return info
}

// listVerbAndName reads a collection GET's list options as Kubernetes'
// RequestInfoFactory does: a watch unless ?watch= is false or 0, and, when
// the field selector requires metadata.name to equal a name that can be a
// path segment, the request is for that one object (authorized, audited
// and measured as such). Options that do not decode name no object, and
// only ?watch= is read then.
func listVerbAndName(q url.Values) (verb, name string) {
	verb = "list"
	if isWatch(q) {
		verb = "watch"
	}
	if _, ok := q["fieldSelector"]; !ok {
		// Nothing can name an object: the options need no decoding.
		return verb, ""
	}
	opts := metainternalversion.ListOptions{}
	if err := metainternalversionscheme.ParameterCodec.DecodeParameters(q, metav1.SchemeGroupVersion, &opts); err != nil {
		return verb, ""
	}
	if opts.FieldSelector != nil {
		if n, ok := opts.FieldSelector.RequiresExactMatch("metadata.name"); ok && len(content.IsPathSegmentName(n)) == 0 {
			name = n
		}
	}
	return verb, name
}

// isWatch reads ?watch= as Kubernetes decodes a boolean query parameter:
// true unless absent, "0" or "false" (in any case), decoded or not.
func isWatch(q url.Values) bool {
	values := q["watch"]
	return len(values) > 0 && values[0] != "0" && !strings.EqualFold(values[0], "false")
}

func splitPath(p string) []string {
	p = strings.Trim(p, "/")
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
}

type infoKey struct{}

// WithInfo returns a context that carries info.
func WithInfo(ctx context.Context, info *Info) context.Context {
	return context.WithValue(ctx, infoKey{}, info)
}

// InfoFrom returns the request info of a context, or nil.
func InfoFrom(ctx context.Context) *Info {
	info, _ := ctx.Value(infoKey{}).(*Info)
	return info
}

// IsLongRunning reports whether the request may stay open indefinitely,
// so that time and in-flight limits do not apply: kube-apiserver's
// long-running requests, watches and the streaming subresources (which
// only aggregated API servers serve here).
func (i *Info) IsLongRunning() bool {
	return i.Verb == "watch" || i.Verb == "proxy" || longRunningSubresources[i.Subresource]
}

var longRunningSubresources = map[string]bool{"attach": true, "exec": true, "proxy": true, "log": true, "portforward": true}
