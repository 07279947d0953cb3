package roundtrip

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/dynamic"

	"github.com/crdserver/crdserver/internal/conversion"
)

// fieldManager names the check's writes in managedFields.
const fieldManager = "crdserver-check-conversion"

var namespaces = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}

// scratchPrefix starts the name of a scratch namespace.
const scratchPrefix = "crdserver-check-"

// Server converts through a server's own conversion, over its API. Admit
// creates each object in its version under a new name — in the scratch
// namespace crdserver-check-<random> that NewServer creates, or with that
// prefix for a cluster-scoped CRD — with its status written through the
// status subresource when the version has one, and returns it as the
// server answered. Convert reads an object that Admit created in the
// version asked for; any other object (one read in another version, such
// as the B form of an A object) is first created in its own version under
// a new name, then read. So the round trip A→B→A of a sample is: create X
// in A, read X in B, create Y from that in B, read Y in A, compare with X
// as created. Objects come back with the name and namespace they were
// given. Close deletes all of it.
type Server struct {
	client     dynamic.Interface
	group      string
	plural     string
	namespaced bool
	status     map[string]bool // versions with a status subresource
	versions   map[string]bool // served versions
	deleteIn   string          // the version to delete objects in
	name       string          // the scratch namespace, or name prefix

	mu      sync.Mutex
	n       int
	created map[string]createdObject // by uid
	names   []string                 // cluster-scoped objects to delete
	nsMade  bool
}

type createdObject struct{ name, version string }

// NewServer returns the converter of crd's objects through the server
// client talks to, and creates its scratch namespace for a namespaced CRD.
// Close it, also when what follows fails.
func NewServer(ctx context.Context, client dynamic.Interface, crd *apiextensionsv1.CustomResourceDefinition) (*Server, error) {
	s := &Server{
		client:     client,
		group:      crd.Spec.Group,
		plural:     crd.Spec.Names.Plural,
		namespaced: crd.Spec.Scope != apiextensionsv1.ClusterScoped,
		status:     map[string]bool{},
		versions:   map[string]bool{},
		name:       scratchPrefix + utilrand.String(5),
		created:    map[string]createdObject{},
	}
	for _, v := range crd.Spec.Versions {
		if !v.Served {
			continue
		}
		s.versions[v.Name] = true
		if s.deleteIn == "" || v.Storage {
			s.deleteIn = v.Name
		}
		if v.Subresources != nil && v.Subresources.Status != nil {
			s.status[v.Name] = true
		}
	}
	if s.deleteIn == "" {
		return nil, fmt.Errorf("CRD %s serves no version", crd.Name)
	}
	if s.namespaced {
		ns := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "Namespace",
			"metadata": map[string]any{"name": s.name},
		}}
		if _, err := client.Resource(namespaces).Create(ctx, ns, metav1.CreateOptions{FieldManager: fieldManager}); err != nil {
			return nil, fmt.Errorf("creating the scratch namespace %s: %w", s.name, err)
		}
		s.nsMade = true
	}
	return s, nil
}

// Namespace is the scratch namespace (for a cluster-scoped CRD, the
// prefix of the objects' names).
func (s *Server) Namespace() string { return s.name }

func (s *Server) resource(version string) dynamic.ResourceInterface {
	r := s.client.Resource(schema.GroupVersionResource{Group: s.group, Version: version, Resource: s.plural})
	if s.namespaced {
		return r.Namespace(s.name)
	}
	return r
}

// version is the version of an apiVersion of the CRD's group.
func (s *Server) version(apiVersion string) (string, error) {
	g, v, ok := strings.Cut(apiVersion, "/")
	if !ok || g != s.group || !s.versions[v] {
		return "", fmt.Errorf("apiVersion %q is not a served version of %s.%s", apiVersion, s.plural, s.group)
	}
	return v, nil
}

// Admit implements Admitter.
func (s *Server) Admit(ctx context.Context, objs [][]byte) ([][]byte, error) {
	decoded, err := decodeAll(objs, "object")
	if err != nil {
		return nil, err
	}
	out := make([]map[string]any, len(objs))
	for i, o := range decoded {
		created, _, err := s.create(ctx, o)
		if err != nil {
			return nil, fmt.Errorf("object %s: %w", ObjectName(o), err)
		}
		out[i] = created
	}
	return encodeAll(out)
}

// Convert implements conversion.Converter: every object comes back as
// the server answered, a new encoding.
func (s *Server) Convert(ctx context.Context, objs [][]byte, toAPIVersion string) (conversion.Result, error) {
	converted, err := s.convert(ctx, objs, toAPIVersion)
	if err != nil {
		return conversion.Result{}, err
	}
	res := conversion.Result{Changed: make([]bool, len(converted))}
	if res.Objects, err = encodeAll(converted); err != nil {
		return conversion.Result{}, err
	}
	for i := range res.Changed {
		res.Changed[i] = true
	}
	return res, nil
}

func (s *Server) convert(ctx context.Context, objs [][]byte, toAPIVersion string) ([]map[string]any, error) {
	to, err := s.version(toAPIVersion)
	if err != nil {
		return nil, err
	}
	decoded, err := decodeAll(objs, "object")
	if err != nil {
		return nil, err
	}
	out := make([]map[string]any, len(objs))
	for i, o := range decoded {
		av, _ := o["apiVersion"].(string)
		from, err := s.version(av)
		if err != nil {
			return nil, err
		}
		uid, _, _ := unstructured.NestedString(o, "metadata", "uid")
		s.mu.Lock()
		c, ok := s.created[uid]
		s.mu.Unlock()
		name := c.name
		if !ok || uid == "" || c.version != from {
			if _, name, err = s.create(ctx, o); err != nil {
				return nil, fmt.Errorf("object %s: %w", ObjectName(o), err)
			}
		}
		got, err := s.resource(to).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("object %s: reading it in %s: %w", ObjectName(o), to, err)
		}
		out[i] = identity(got.Object, o)
	}
	return out, nil
}

// create writes obj in its version under a new name (its labels and
// annotations kept, the rest of its metadata left to the server) and
// its status through the status subresource, and returns it as the
// server answered, with obj's name and namespace, and the name it has.
func (s *Server) create(ctx context.Context, obj map[string]any) (map[string]any, string, error) {
	av, _ := obj["apiVersion"].(string)
	version, err := s.version(av)
	if err != nil {
		return nil, "", err
	}
	body, err := clone(obj)
	if err != nil {
		return nil, "", err
	}
	old, _ := body["metadata"].(map[string]any)
	s.mu.Lock()
	s.n++
	name := s.name + "-" + strconv.Itoa(s.n)
	s.mu.Unlock()
	md := map[string]any{"name": name}
	for _, f := range []string{"labels", "annotations"} {
		if v, ok := old[f]; ok {
			md[f] = v
		}
	}
	body["metadata"] = md
	status, hasStatus := body["status"]
	res := s.resource(version)
	created, err := res.Create(ctx, &unstructured.Unstructured{Object: body}, metav1.CreateOptions{FieldManager: fieldManager})
	if err != nil {
		return nil, "", fmt.Errorf("creating it in %s: %w", version, err)
	}
	s.mu.Lock()
	s.created[string(created.GetUID())] = createdObject{name: name, version: version}
	if !s.namespaced {
		s.names = append(s.names, name)
	}
	s.mu.Unlock()
	if hasStatus && s.status[version] {
		created.Object["status"] = status
		if created, err = res.UpdateStatus(ctx, created, metav1.UpdateOptions{FieldManager: fieldManager}); err != nil {
			return nil, "", fmt.Errorf("writing its status in %s: %w", version, err)
		}
	}
	return identity(created.Object, obj), name, nil
}

// identity gives obj the name and namespace of from.
func identity(obj, from map[string]any) map[string]any {
	md, _ := obj["metadata"].(map[string]any)
	if md == nil {
		md = map[string]any{}
		obj["metadata"] = md
	}
	fmd, _ := from["metadata"].(map[string]any)
	for _, f := range []string{"name", "namespace"} {
		if v, ok := fmd[f]; ok {
			md[f] = v
		} else {
			delete(md, f)
		}
	}
	return obj
}

// Close deletes what the converter created: the objects, then the
// scratch namespace. Give it a context of its own, so that it runs even
// when the check's was cancelled.
func (s *Server) Close(ctx context.Context) error {
	s.mu.Lock()
	names := append([]string(nil), s.names...)
	s.mu.Unlock()
	var errs []error
	ignore := func(err error) {
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	if s.namespaced && s.nsMade {
		ignore(s.resource(s.deleteIn).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}))
		ignore(s.client.Resource(namespaces).Delete(ctx, s.name, metav1.DeleteOptions{}))
	}
	for _, n := range names {
		ignore(s.resource(s.deleteIn).Delete(ctx, n, metav1.DeleteOptions{}))
	}
	if len(errs) > 0 {
		return fmt.Errorf("cleaning up %s: %w", s.name, errors.Join(errs...))
	}
	return nil
}

// Live lists up to limit objects of crd as the server serves them in
// version, in every namespace, by namespace and name (leaving out those
// of checks under way).
func Live(ctx context.Context, client dynamic.Interface, crd *apiextensionsv1.CustomResourceDefinition, version string, limit int) ([]map[string]any, error) {
	gvr := schema.GroupVersionResource{Group: crd.Spec.Group, Version: version, Resource: crd.Spec.Names.Plural}
	list, err := client.Resource(gvr).List(ctx, metav1.ListOptions{Limit: int64(limit)})
	if err != nil {
		return nil, fmt.Errorf("listing %s in %s: %w", crd.Name, version, err)
	}
	out := make([]map[string]any, 0, len(list.Items))
	for _, it := range list.Items {
		if len(out) == limit {
			break
		}
		if strings.HasPrefix(it.GetNamespace(), scratchPrefix) || strings.HasPrefix(it.GetName(), scratchPrefix) {
			continue // another check's
		}
		out = append(out, it.Object)
	}
	return out, nil
}
