package resource

import (
	"context"
	"fmt"
	"net/http"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/crdserver/crdserver/internal/conversion"
	"github.com/crdserver/crdserver/internal/jsonraw"
	"github.com/crdserver/crdserver/internal/request"
	"github.com/crdserver/crdserver/internal/store"
)

// Resource is everything the engine needs to serve one resource in all its
// served versions. A Resource is immutable once published: a change (a CRD
// edit) publishes a new Resource that shares the old one's Cache, so
// requests in flight finish on the old definition and watches go on.
type Resource struct {
	Group      string
	Plural     string
	Singular   string
	Kind       string
	ListKind   string
	ShortNames []string
	Categories []string
	Namespaced bool
	// Versions are the served versions, highest priority first.
	Versions []*Version
	// StorageVersion is the version objects are written in.
	StorageVersion string
	// StorageAPIVersion, when set, is the apiVersion objects are stored
	// in when it is not StorageVersion of the resource's own group: the
	// events.k8s.io API stores core v1 Events.
	StorageAPIVersion string
	// TTL, when set, is how long an object lives after its last write
	// (Kubernetes' --event-ttl).
	TTL time.Duration
	// KeyPrefix is where the objects live in etcd, ending in "/".
	KeyPrefix string
	// Cache mirrors KeyPrefix.
	Cache *store.Cache
	// Strategy holds the rules of this kind of object.
	Strategy Strategy
	// Converter converts objects between versions.
	Converter conversion.Converter
	// Table makes the Tables of `kubectl get` (nil: Name and Age).
	Table TableConvertor
	// FieldManagers track managedFields and serve server-side apply.
	FieldManagers *FieldManagers
	// AllowUnconditionalUpdate lets a PUT without resourceVersion through
	// (true for namespaces; custom resources and CRDs require one).
	AllowUnconditionalUpdate bool
	// AllowCreateOnUpdate lets a PUT without resourceVersion create an
	// object that does not exist (Leases).
	AllowCreateOnUpdate bool
	// ReturnDeletedObject answers a delete that removes an object with
	// the object (its last state) instead of a Status, as kube's
	// registries of Pods, Services, ServiceAccounts and a few more do.
	ReturnDeletedObject bool
	// StrategicMergeType, when set, is the Go type that strategic merge
	// patches of this resource are computed against (built-in types only).
	StrategicMergeType any
	// Protobuf says request bodies may come in Kubernetes' protobuf
	// encoding (built-in types only).
	Protobuf bool
	// Terminating is set while the resource's CRD is being deleted: new
	// objects cannot be created.
	Terminating bool
	// ShortNamesFor, Verbs: discovery.
	Verbs []string
	// ValidateName, when set, checks names instead of the DNS subdomain
	// rule (namespaces are DNS labels, RBAC names path segments; a CRD's
	// strategy checks its name against its spec).
	ValidateName func(name string, prefix bool) []string
	// Subresources are subresources a resource answers itself (a
	// ServiceAccount's token), besides status, scale and finalize.
	Subresources []*Subresource
	// Custom, when set, serves every request of a resource that is not
	// stored (the review resources of authorization.k8s.io); it has no
	// Cache.
	Custom func(w http.ResponseWriter, r *http.Request, info *request.Info, ver *Version)
}

// Subresource is a subresource that answers its requests itself.
type Subresource struct {
	Name string
	// Verbs it answers; others are 405.
	Verbs []string
	// Group, Version and Kind of what it takes and returns (discovery).
	Group, Version, Kind string
	// Serve answers one request, for the object info names.
	Serve func(w http.ResponseWriter, r *http.Request, info *request.Info, res *Resource, ver *Version)
}

// Version is one served version of a resource.
type Version struct {
	Name string
	// Status enables the status subresource.
	Status bool
	// Deprecated versions answer every request with Warning.
	Deprecated bool
	Warning    string
	// Scale enables the scale subresource.
	Scale *Scale
	// SelectableFields are the fields field selectors may name besides
	// metadata.name and metadata.namespace (without the leading dot).
	SelectableFields []string
	// FieldLabels are field selector labels of a built-in type, each with
	// how its value is read from a stored object.
	FieldLabels map[string]FieldLabel
}

// FieldLabel reads the value a field selector label has for a stored
// object (its JSON).
type FieldLabel func(raw []byte) string

// ScalarField is the FieldLabel of the scalar at path in the object ("" when
// there is none).
func ScalarField(path ...string) FieldLabel {
	return func(raw []byte) string {
		v, _ := jsonraw.Scalar(raw, path)
		return v
	}
}

// GroupResource names the resource.
func (r *Resource) GroupResource() schema.GroupResource {
	return schema.GroupResource{Group: r.Group, Resource: r.Plural}
}

// APIVersion returns group/version of version v (or v alone in the core
// group).
func (r *Resource) APIVersion(v string) string {
	if r.Group == "" {
		return v
	}
	return r.Group + "/" + v
}

// Version returns the served version named v.
func (r *Resource) Version(v string) *Version {
	for _, ver := range r.Versions {
		if ver.Name == v {
			return ver
		}
	}
	return nil
}

// Key is the etcd key of an object.
func (r *Resource) Key(namespace, name string) string {
	if r.Namespaced {
		return r.KeyPrefix + namespace + "/" + name
	}
	return r.KeyPrefix + name
}

// DefaultVerbs are the verbs of a resource with every operation.
var DefaultVerbs = []string{"delete", "deletecollection", "get", "list", "patch", "create", "update", "watch"}

// Strategy holds the rules of one kind of object. The engine handles
// metadata (names, uid, timestamps, resourceVersion, generation on create)
// before calling it.
type Strategy interface {
	// PrepareForCreate clears what a client may not set on create.
	PrepareForCreate(ctx context.Context, obj *Object)
	// PrepareForUpdate keeps what a client may not change on update and
	// sets the generation.
	PrepareForUpdate(ctx context.Context, obj, old *Object)
	// Validate checks a new object.
	Validate(ctx context.Context, obj *Object) field.ErrorList
	// ValidateUpdate checks an updated object against the old one.
	ValidateUpdate(ctx context.Context, obj, old *Object) field.ErrorList
}

// StatusStrategy holds the rules of the status subresource.
type StatusStrategy interface {
	PrepareForStatusUpdate(ctx context.Context, obj, old *Object)
	ValidateStatusUpdate(ctx context.Context, obj, old *Object) field.ErrorList
}

// DeleteHook lets a resource turn a delete into an update (a CRD or a
// namespace is first marked terminating, then cleaned up by a
// controller). BeforeDelete changes obj and returns true when obj must be
// written instead of deleted, or an error to refuse the delete.
type DeleteHook interface {
	BeforeDelete(ctx context.Context, obj *Object) (bool, error)
}

// GracefulDeleter lets a resource delete objects gracefully, as kube's
// rest.BeforeDelete does with a graceful delete strategy (a Pod on a node
// waits for its kubelet). BeforeGracefulDelete may set opts'
// gracePeriodSeconds and obj's deletionTimestamp,
// deletionGracePeriodSeconds and generation; graceful says it did (a
// grace period of 0: the object is written so, then deleted; more: it
// stays). pending says a graceful deletion is under way and this delete
// does not shorten it: nothing is written.
type GracefulDeleter interface {
	BeforeGracefulDelete(ctx context.Context, obj *Object, opts *metav1.DeleteOptions) (graceful, pending bool, err error)
}

// Allocator lets a strategy take from a shared pool what an object holds
// (a Service's cluster IPs and node ports) as it is created or updated,
// and give it back when the object goes, as kube-apiserver's BeginCreate,
// BeginUpdate and AfterDelete registry hooks do. Allocate runs before the
// strategy's Prepare method (old is nil on create) and may change obj;
// the engine calls finish once the write is done, with whether it
// succeeded (a failed or abandoned write gives back what was taken). A
// dry run takes nothing. Release runs once obj is deleted.
type Allocator interface {
	Allocate(ctx context.Context, obj, old *Object, dry bool) (finish func(ok bool), err error)
	Release(ctx context.Context, obj *Object)
}

// Finalizer lets a resource keep an object whose metadata finalizers are
// gone after deletion was requested (a namespace waits for its
// spec.finalizers too).
type Finalizer interface {
	Finalized(obj *Object) bool
}

// FinalizeStrategy holds the rules of a namespace's finalize subresource.
type FinalizeStrategy interface {
	PrepareForFinalize(ctx context.Context, obj, old *Object)
}

// Admitter lets a resource refuse a write for who makes it (RBAC's
// escalation checks): Admit runs after validation, old is nil on create.
type Admitter interface {
	Admit(ctx context.Context, obj, old *Object) error
}

// Warner lets a strategy warn about an accepted write (Kubernetes'
// WarningsOnCreate and WarningsOnUpdate); the texts reach the client as
// Warning headers.
type Warner interface {
	WarningsOnCreate(ctx context.Context, obj *Object) []string
	WarningsOnUpdate(ctx context.Context, obj, old *Object) []string
}

// OrphanDefaulter lets a resource orphan an object's dependents when a
// delete names no propagation policy (kube's OrphanDependents default
// garbage collection policy: batch/v1 Jobs), with the warning kube sends
// then.
type OrphanDefaulter interface {
	OrphansByDefault() (warning string, orphan bool)
}

// Stamper lets a strategy vouch for what its rules made of an object about
// to be written (after its Prepare method): the stamp goes with the write
// (store.WriteOptions), so that readers of the cache know what they need
// not do again. Nil vouches for nothing.
type Stamper interface {
	WriteStamp(obj *Object) *store.WriteStamp
}

// Normalizer lets a built-in type check and normalize a decoded request
// body through its Go type (dropping unknown fields, applying defaults).
// It returns the strict decoding errors (unknown fields) for field
// validation; its errors reach the client as they are.
type Normalizer interface {
	Normalize(obj *Object) ([]error, error)
}

func (r *Resource) String() string {
	if r.Group == "" {
		return r.Plural
	}
	return fmt.Sprintf("%s.%s", r.Plural, r.Group)
}
