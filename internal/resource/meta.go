package resource

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/validation"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/crdserver/crdserver/internal/request"
)

// Generated names: the prefix is cut so that prefix and suffix fit 63
// characters, as Kubernetes' SimpleNameGenerator does.
const (
	maxGeneratedNameLength = 63 - 5
	generateNameAttempts   = 8
)

func generateName(base string) string {
	if len(base) > maxGeneratedNameLength {
		base = base[:maxGeneratedNameLength]
	}
	return base + utilrand.String(5)
}

var errNamespaceMismatch = apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")

// matchNamespace sets or checks the object's namespace against the
// request's, as rest.EnsureObjectNamespaceMatchesRequestNamespace does.
func (c *call) matchNamespace(obj *Object) error {
	want := c.namespace
	switch got := obj.Meta.Namespace; {
	case got == want:
	case got == "":
		obj.Meta.Namespace = want
	case want == "":
		obj.Meta.Namespace = ""
	default:
		return errNamespaceMismatch
	}
	return nil
}

// checkTypeMeta checks apiVersion and kind of a request body against the
// endpoint: a wrong apiVersion is a 400, a wrong kind a 422.
func (c *call) checkTypeMeta(av, k, name string) error {
	if av != c.apiVersion() {
		return apierrors.NewBadRequest("the API version in the data (" + av + ") does not match the expected API version (" + c.apiVersion() + ")")
	}
	if k != c.res.Kind {
		if k == "" {
			return apierrors.NewBadRequest("the object provided is unrecognized (must be of type " + c.res.Kind + "): Object 'Kind' is missing")
		}
		return c.invalid(k, name, field.ErrorList{field.Invalid(field.NewPath("kind"), k, "must be "+c.res.Kind)})
	}
	return nil
}

// nameFunc validates names: DNS subdomains, unless the resource says how.
func (c *call) nameFunc() validation.ValidateNameFunc {
	if c.res.ValidateName != nil {
		return c.res.ValidateName
	}
	return validation.NameIsDNSSubdomain
}

// prepareCreate applies what kube-apiserver does to every new object before
// its strategy sees it, then the strategy, then validation.
func (c *call) prepareCreate(ctx context.Context, obj *Object) error {
	if err := c.matchNamespace(obj); err != nil {
		return err
	}
	m := &obj.Meta
	m.DeletionTimestamp = nil
	m.DeletionGracePeriodSeconds = nil
	m.CreationTimestamp = c.h.now()
	m.UID = uuid.NewUUID()
	m.Generation = 0
	m.SelfLink = "" //nolint:staticcheck // cleared as Kubernetes clears it
	c.res.Strategy.PrepareForCreate(ctx, obj)
	errs := validation.ValidateObjectMetaAccessor(m, c.res.Namespaced, c.nameFunc(), field.NewPath("metadata"))
	errs = append(errs, c.res.Strategy.Validate(ctx, obj)...)
	if len(errs) > 0 {
		return c.invalid(obj.Kind(), m.Name, errs)
	}
	if a, ok := c.res.Strategy.(Admitter); ok {
		if err := a.Admit(ctx, obj, nil); err != nil {
			return err
		}
	}
	if w, ok := c.res.Strategy.(Warner); ok {
		for _, text := range w.WarningsOnCreate(ctx, obj) {
			request.AddWarning(c.w, text)
		}
	}
	return nil
}

// prepareUpdate applies what kube-apiserver does to an updated object
// (server-owned metadata keeps its stored values), the strategy's update
// rules, then validation.
func (c *call) prepareUpdate(ctx context.Context, obj, old *Object, sub string) error {
	if err := c.matchNamespace(obj); err != nil {
		return err
	}
	m, om := &obj.Meta, &old.Meta
	m.Generation = om.Generation
	m.SelfLink = "" //nolint:staticcheck // cleared as Kubernetes clears it
	switch sub {
	case "status":
		c.res.Strategy.(StatusStrategy).PrepareForStatusUpdate(ctx, obj, old)
	case "finalize":
		c.res.Strategy.(FinalizeStrategy).PrepareForFinalize(ctx, obj, old)
	default:
		c.res.Strategy.PrepareForUpdate(ctx, obj, old)
	}
	if m.UID == "" {
		m.UID = om.UID
	}
	if !om.CreationTimestamp.IsZero() {
		m.CreationTimestamp = om.CreationTimestamp
	}
	if om.DeletionTimestamp != nil {
		m.DeletionTimestamp = om.DeletionTimestamp
	}
	if om.DeletionGracePeriodSeconds != nil && m.DeletionGracePeriodSeconds == nil {
		m.DeletionGracePeriodSeconds = om.DeletionGracePeriodSeconds
	}
	errs := validation.ValidateObjectMetaAccessor(m, c.res.Namespaced, func(string, bool) []string { return nil }, field.NewPath("metadata"))
	errs = append(errs, validation.ValidateObjectMetaAccessorUpdate(m, om, field.NewPath("metadata"))...)
	if sub == "status" {
		errs = append(errs, c.res.Strategy.(StatusStrategy).ValidateStatusUpdate(ctx, obj, old)...)
	} else {
		errs = append(errs, c.res.Strategy.ValidateUpdate(ctx, obj, old)...)
	}
	if len(errs) > 0 {
		return c.invalid(obj.Kind(), m.Name, errs)
	}
	if a, ok := c.res.Strategy.(Admitter); ok {
		if err := a.Admit(ctx, obj, old); err != nil {
			return err
		}
	}
	if w, ok := c.res.Strategy.(Warner); ok && sub == "" {
		for _, text := range w.WarningsOnUpdate(ctx, obj, old) {
			request.AddWarning(c.w, text)
		}
	}
	return nil
}
