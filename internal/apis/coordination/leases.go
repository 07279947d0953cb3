// Package coordination is the built-in coordination.k8s.io/v1 API:
// Leases, which client-go's leader election (and crdserver's own) acquires,
// renews and hands over. Validation follows Kubernetes' to the message
// (it lives in k8s.io/kubernetes, which cannot be imported); as in
// Kubernetes 1.37, whose CoordinatedLeaderElection feature is off by
// default, spec.strategy and spec.preferredHolder are dropped unless the
// stored lease already had them, and a PUT of a missing lease creates it.
package coordination

import (
	"context"
	"fmt"
	"slices"
	"strings"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/crdserver/crdserver/internal/conversion"
	"github.com/crdserver/crdserver/internal/resource"
	"github.com/crdserver/crdserver/internal/store"
)

// LeasePrefix is where Leases live in etcd.
const LeasePrefix = "/registry/leases/"

// Leases is the leases resource, served from cache.
func Leases(cache *store.Cache) *resource.Resource {
	return &resource.Resource{
		Group:               coordinationv1.GroupName,
		Plural:              "leases",
		Singular:            "lease",
		Kind:                "Lease",
		ListKind:            "LeaseList",
		Namespaced:          true,
		Versions:            []*resource.Version{{Name: "v1"}},
		StorageVersion:      "v1",
		KeyPrefix:           LeasePrefix,
		Cache:               cache,
		Strategy:            leaseStrategy{},
		Converter:           conversion.None{},
		Table:               leaseTable{},
		FieldManagers:       resource.BuiltinFieldManagers(coordinationv1.GroupName, "Lease", false),
		AllowCreateOnUpdate: true,
		Protobuf:            true,
		StrategicMergeType:  &coordinationv1.Lease{},
		Verbs:               []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"},
	}
}

type leaseStrategy struct{}

func toLease(obj *resource.Object) (*coordinationv1.Lease, error) {
	l := &coordinationv1.Lease{}
	return l, resource.ToTyped(obj, l)
}

// Normalize decodes a body through the Lease type.
func (leaseStrategy) Normalize(obj *resource.Object) ([]error, error) {
	l := &coordinationv1.Lease{}
	strict, err := resource.DecodeStrict(obj, l)
	if err == nil {
		err = resource.FromTyped(l, obj)
	}
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("Lease in version \"v1\" cannot be handled as a Lease: %v", err))
	}
	return strict, nil
}

func edit(obj *resource.Object, f func(l *coordinationv1.Lease)) {
	l, err := toLease(obj)
	if err != nil {
		return
	}
	f(l)
	_ = resource.FromTyped(l, obj)
}

func (leaseStrategy) PrepareForCreate(_ context.Context, obj *resource.Object) {
	edit(obj, func(l *coordinationv1.Lease) {
		l.Spec.Strategy, l.Spec.PreferredHolder = nil, nil
	})
}

func (leaseStrategy) PrepareForUpdate(_ context.Context, obj, old *resource.Object) {
	o, err := toLease(old)
	if err != nil {
		return
	}
	edit(obj, func(l *coordinationv1.Lease) {
		if o.Spec.Strategy == nil {
			l.Spec.Strategy = nil
		}
		if o.Spec.PreferredHolder == nil {
			l.Spec.PreferredHolder = nil
		}
	})
}

func (leaseStrategy) Validate(_ context.Context, obj *resource.Object) field.ErrorList {
	l, err := toLease(obj)
	if err != nil {
		return field.ErrorList{field.Invalid(field.NewPath("spec"), nil, err.Error())}
	}
	return validateSpec(&l.Spec, field.NewPath("spec"))
}

func (s leaseStrategy) ValidateUpdate(ctx context.Context, obj, _ *resource.Object) field.ErrorList {
	return s.Validate(ctx, obj)
}

// leaseStrategies are the strategies of coordinated leader election
// Kubernetes defines.
var leaseStrategies = []coordinationv1.CoordinatedLeaseStrategy{coordinationv1.OldestEmulationVersion}

// validateSpec checks a LeaseSpec with Kubernetes' rules and messages.
func validateSpec(spec *coordinationv1.LeaseSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if spec.LeaseDurationSeconds != nil && *spec.LeaseDurationSeconds <= 0 {
		errs = append(errs, field.Invalid(p.Child("leaseDurationSeconds"), spec.LeaseDurationSeconds, "must be greater than 0"))
	}
	if spec.LeaseTransitions != nil && *spec.LeaseTransitions < 0 {
		errs = append(errs, field.Invalid(p.Child("leaseTransitions"), spec.LeaseTransitions, "must be greater than or equal to 0"))
	}
	if spec.Strategy != nil {
		sp := p.Child("strategy").Child("strategy")
		if !strings.Contains(string(*spec.Strategy), "/") {
			if !slices.Contains(leaseStrategies, *spec.Strategy) {
				errs = append(errs, field.NotSupported(sp, *spec.Strategy, leaseStrategies))
			}
		} else {
			for _, msg := range utilvalidation.IsQualifiedName(string(*spec.Strategy)) {
				errs = append(errs, field.Invalid(sp, *spec.Strategy, msg))
			}
		}
	}
	if spec.PreferredHolder != nil && *spec.PreferredHolder != "" && (spec.Strategy == nil || *spec.Strategy == "") {
		errs = append(errs, field.Forbidden(p.Child("preferredHolder"), "may only be specified if `strategy` is defined"))
	}
	return errs
}

// leaseTable is kubectl's table of leases: Name, Holder, Age.
type leaseTable struct{}

func (leaseTable) ConvertToTable(_ context.Context, _ string, objs []*unstructured.Unstructured, noHeaders bool) (*metav1.Table, error) {
	tbl := &metav1.Table{}
	if !noHeaders {
		tbl.ColumnDefinitions = []metav1.TableColumnDefinition{
			{Name: "Name", Type: "string", Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]},
			{Name: "Holder", Type: "string", Description: coordinationv1.LeaseSpec{}.SwaggerDoc()["holderIdentity"]},
			{Name: "Age", Type: "string", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]},
		}
	}
	for _, o := range objs {
		holder, _, _ := unstructured.NestedString(o.Object, "spec", "holderIdentity")
		tbl.Rows = append(tbl.Rows, metav1.TableRow{Cells: []any{o.GetName(), holder, resource.Age(o.GetCreationTimestamp())}})
	}
	return tbl, nil
}
