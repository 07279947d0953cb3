// Package crdnames is the controller that accepts the names a
// CustomResourceDefinition asks for — unless another CRD of its group, or a
// built-in resource, holds them (NamesAccepted, with the Kubernetes
// reasons) — and then establishes it, as Kubernetes' naming and
// establishing controllers do.
package crdnames

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"

	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/util/webhook"

	"github.com/crdserver/crdserver/internal/apis/apiextensions"
	"github.com/crdserver/crdserver/internal/controller"
	"github.com/crdserver/crdserver/internal/registry"
)

// Reader is what the controller reads: the Index, and when it reflects a
// write.
type Reader interface {
	controller.Reader
	// WaitApplied waits until the Index reflects every CRD change up to a
	// revision.
	WaitApplied(ctx context.Context, rev int64) error
	// CatchUp waits until the Index reflects every stored CRD.
	CatchUp(ctx context.Context) error
}

// Controller accepts the names of CRDs and establishes them, as
// Kubernetes' naming and establishing controllers do. It works one CRD at a
// time and decides each from a view that holds its own last write, so that
// of two CRDs asking for one name at once exactly one gets it.
type Controller struct {
	reader Reader
	client apiextensionsclient.Interface
	log    *slog.Logger
	queue  controller.Queue
	// groups serializes the decisions of one group: names are only
	// contested within a group, so several workers decide at once.
	groups sync.Map // group → *sync.Mutex
}

// workers is how many CRDs are decided at once (each in its own group).
const workers = 4

// New returns the controller; it writes CRD status through client.
func New(reader Reader, client apiextensionsclient.Interface, log *slog.Logger) *Controller {
	return &Controller{reader: reader, client: client, log: log, queue: controller.NewQueue("crd-names")}
}

// Name implements controller.Controller.
func (c *Controller) Name() string { return "crd-names" }

// Run implements controller.Controller: every CRD that changes is synced;
// when one goes, the others of its group are looked at again, as names it
// held are free.
func (c *Controller) Run(ctx context.Context) {
	seen := map[string]*apiextensionsv1.CustomResourceDefinition{}
	c.reader.Subscribe(func(ix *registry.Index) {
		for name, crd := range ix.CRDs {
			if seen[name] != crd {
				c.queue.Add(name)
			}
		}
		for name, crd := range seen {
			if _, ok := ix.CRDs[name]; ok {
				continue
			}
			for other, o := range ix.CRDs {
				if o.Spec.Group == crd.Spec.Group {
					c.queue.Add(other)
				}
			}
		}
		seen = maps.Clone(ix.CRDs)
	})
	// A term starts from everything stored, another leader's writes too.
	if err := c.reader.CatchUp(ctx); err != nil && ctx.Err() == nil {
		c.log.Warn("crd names: catching up", "err", err)
	}
	controller.Work(ctx, c.Name(), c.queue, workers, c.log, c.sync)
}

// sync drives one CRD: names accepted, and established with them. A CRD
// being deleted is left to the cleanup controller. The CRDs of one group
// are decided one at a time, each from an Index that holds the last
// decision's write.
func (c *Controller) sync(ctx context.Context, name string) error {
	crd := c.reader.Index().CRDs[name]
	if crd == nil || crd.DeletionTimestamp != nil {
		return nil
	}
	mu, _ := c.groups.LoadOrStore(crd.Spec.Group, &sync.Mutex{})
	mu.(*sync.Mutex).Lock()
	defer mu.(*sync.Mutex).Unlock()
	ix := c.reader.Index()
	crd = ix.CRDs[name]
	if crd == nil || crd.DeletionTimestamp != nil {
		return nil
	}
	crd = crd.DeepCopy()
	names, namesCond, estCond := acceptNames(ix, crd)
	// As Kubernetes' naming controller, it writes when the names or the
	// NamesAccepted condition change, and Established only with them:
	// comparing Established too would undo the establishing below (a
	// CRD with an invalid caBundle: Installing, InvalidCABundle, Installing,
	// ... without end). The registry serves a CRD from the moment its
	// names are accepted, so names accepted for the first time establish
	// it in the same write (Kubernetes' establishing controller writes
	// Established True in a second one).
	if !reflect.DeepEqual(names, crd.Status.AcceptedNames) ||
		!apihelpers.IsCRDConditionEquivalent(&namesCond, apihelpers.FindCRDCondition(crd, apiextensionsv1.NamesAccepted)) {
		crd.Status.AcceptedNames = names
		apihelpers.SetCRDCondition(crd, namesCond)
		if estCond.Reason == "Installing" {
			estCond = establishedCondition(crd)
		}
		apihelpers.SetCRDCondition(crd, estCond)
		return c.write(ctx, crd)
	}
	// The registry serves the resource from the moment its names were
	// accepted (this runs after the registry applied that state): it is
	// established.
	if namesCond.Status == apiextensionsv1.ConditionTrue && !apiextensions.IsEstablished(crd) {
		est := establishedCondition(crd)
		if apihelpers.IsCRDConditionEquivalent(&est, apihelpers.FindCRDCondition(crd, apiextensionsv1.Established)) {
			return nil
		}
		apihelpers.SetCRDCondition(crd, est)
		return c.write(ctx, crd)
	}
	return nil
}

// establishedCondition is the Established condition of a CRD whose names
// are accepted, as Kubernetes' establishing controller sets it: True, or
// False when its conversion webhook's caBundle is not a valid PEM bundle.
func establishedCondition(crd *apiextensionsv1.CustomResourceDefinition) apiextensionsv1.CustomResourceDefinitionCondition {
	if conv := crd.Spec.Conversion; conv != nil && conv.Webhook != nil && conv.Webhook.ClientConfig != nil &&
		len(webhook.ValidateCABundle(field.NewPath(""), conv.Webhook.ClientConfig.CABundle)) > 0 {
		return apiextensionsv1.CustomResourceDefinitionCondition{
			Type:    apiextensionsv1.Established,
			Status:  apiextensionsv1.ConditionFalse,
			Reason:  "InvalidCABundle",
			Message: "The conversion webhook CABundle is invalid",
		}
	}
	return apiextensionsv1.CustomResourceDefinitionCondition{
		Type:    apiextensionsv1.Established,
		Status:  apiextensionsv1.ConditionTrue,
		Reason:  "InitialNamesAccepted",
		Message: "the initial names have been accepted",
	}
}

// write stores a CRD's status, then waits until the Index shows it: the
// next decision sees the names this one accepted.
func (c *Controller) write(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) error {
	out, err := c.client.ApiextensionsV1().CustomResourceDefinitions().UpdateStatus(ctx, crd, metav1.UpdateOptions{})
	if err != nil {
		return err
	}
	rev, err := strconv.ParseInt(out.ResourceVersion, 10, 64)
	if err != nil {
		return nil // no revision to wait for
	}
	return c.reader.WaitApplied(ctx, rev)
}

// acceptNames decides which of a CRD's requested names it may have: a name
// another CRD of the group already holds is refused, as Kubernetes' naming
// controller does, and the CRD keeps the names it had.
func acceptNames(ix *registry.Index, crd *apiextensionsv1.CustomResourceDefinition) (apiextensionsv1.CustomResourceDefinitionNames, apiextensionsv1.CustomResourceDefinitionCondition, apiextensionsv1.CustomResourceDefinitionCondition) {
	usedResources, usedKinds := sets.New[string](), sets.New[string]()
	for n, other := range ix.CRDs {
		if n == crd.Name || other.Spec.Group != crd.Spec.Group {
			continue
		}
		an := other.Status.AcceptedNames
		usedResources.Insert(an.Plural, an.Singular)
		usedResources.Insert(an.ShortNames...)
		usedKinds.Insert(an.Kind, an.ListKind)
	}
	for _, b := range ix.Resources {
		if ix.Builtin[b] && b.Group == crd.Spec.Group {
			usedResources.Insert(b.Plural, b.Singular)
			usedResources.Insert(b.ShortNames...)
			usedKinds.Insert(b.Kind, b.ListKind)
		}
	}

	cond := apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.NamesAccepted, Status: apiextensionsv1.ConditionTrue, Reason: "NoConflicts", Message: "no conflicts found"}
	conflict := func(reason, name string) {
		cond.Status, cond.Reason, cond.Message = apiextensionsv1.ConditionFalse, reason, fmt.Sprintf("%q is already in use", name)
	}
	want, have := crd.Spec.Names, crd.Status.AcceptedNames
	out := have
	free := func(name, held string, used sets.Set[string]) bool {
		return name == held || !used.Has(name)
	}
	if free(want.Plural, have.Plural, usedResources) {
		out.Plural = want.Plural
	} else {
		conflict("PluralConflict", want.Plural)
	}
	if free(want.Singular, have.Singular, usedResources) {
		out.Singular = want.Singular
	} else {
		conflict("SingularConflict", want.Singular)
	}
	if !reflect.DeepEqual(want.ShortNames, have.ShortNames) {
		var taken []string
		for _, s := range want.ShortNames {
			if !slices.Contains(have.ShortNames, s) && usedResources.Has(s) {
				taken = append(taken, fmt.Sprintf("%q is already in use", s))
			}
		}
		if len(taken) == 0 {
			out.ShortNames = want.ShortNames
		} else {
			cond.Status, cond.Reason = apiextensionsv1.ConditionFalse, "ShortNamesConflict"
			cond.Message = taken[0]
			if len(taken) > 1 {
				cond.Message = "[" + strings.Join(taken, ", ") + "]"
			}
		}
	}
	if free(want.Kind, have.Kind, usedKinds) {
		out.Kind = want.Kind
	} else {
		conflict("KindConflict", want.Kind)
	}
	if free(want.ListKind, have.ListKind, usedKinds) {
		out.ListKind = want.ListKind
	} else {
		conflict("ListKindConflict", want.ListKind)
	}
	out.Categories = want.Categories

	est := apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionFalse, Reason: "NotAccepted", Message: "not all names are accepted"}
	if old := apihelpers.FindCRDCondition(crd, apiextensionsv1.Established); old != nil {
		est = *old
	}
	if est.Status != apiextensionsv1.ConditionTrue && cond.Status == apiextensionsv1.ConditionTrue {
		est = apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionFalse, Reason: "Installing", Message: "the initial names have been accepted"}
	}
	return out, cond, est
}
