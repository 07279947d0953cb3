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
// Kubernetes' naming and establishing controllers do. It decides a group's
// CRDs together, oldest first, from a view that holds its own last writes,
// so that of two CRDs asking for one name at once exactly one gets it.
type Controller struct {
	reader Reader
	client apiextensionsclient.Interface
	log    *slog.Logger
	queue  controller.Queue
}

// workers is how many groups are decided at once, and writers how many
// status writes of one group are in flight at once.
const (
	workers = 4
	writers = 4
)

// New returns the controller; it writes CRD status through client.
func New(reader Reader, client apiextensionsclient.Interface, log *slog.Logger) *Controller {
	return &Controller{reader: reader, client: client, log: log, queue: controller.NewQueue("crd-names")}
}

// Name implements controller.Controller.
func (c *Controller) Name() string { return "crd-names" }

// Run implements controller.Controller: the group of every CRD that
// changes (or goes, freeing the names it held) is synced.
func (c *Controller) Run(ctx context.Context) {
	groups := map[string]string{} // CRD name → group
	first := true
	c.reader.Subscribe(func(ix *registry.Index) {
		if first || ix.Changed == nil {
			first = false
			for group := range ix.Groups {
				c.queue.Add(group)
			}
			groups = make(map[string]string, len(ix.CRDs))
			for name, crd := range ix.CRDs {
				groups[name] = crd.Spec.Group
			}
			return
		}
		for _, name := range ix.Changed {
			if g, ok := groups[name]; ok {
				c.queue.Add(g)
			}
			if crd := ix.CRDs[name]; crd != nil {
				groups[name] = crd.Spec.Group
				c.queue.Add(crd.Spec.Group)
			} else {
				delete(groups, name)
			}
		}
	})
	// A term starts from everything stored, another leader's writes too.
	if err := c.reader.CatchUp(ctx); err != nil && ctx.Err() == nil {
		c.log.Warn("crd names: catching up", "err", err)
	}
	controller.Work(ctx, c.Name(), c.queue, workers, c.log, c.sync)
}

// sync decides the CRDs of one group, oldest first (CRDs being deleted are
// the cleanup controller's): each CRD's names are accepted unless a CRD
// decided before it or a built-in resource holds them, and a CRD whose
// names are accepted for the first time is established in the same write.
// The writes go out together; then the Index is waited for, so that the
// next decision sees them.
func (c *Controller) sync(ctx context.Context, group string) error {
	ix := c.reader.Index()
	var members []*apiextensionsv1.CustomResourceDefinition
	for _, name := range ix.Groups[group] {
		if crd := ix.CRDs[name]; crd != nil {
			members = append(members, crd)
		}
	}
	slices.SortStableFunc(members, func(a, b *apiextensionsv1.CustomResourceDefinition) int {
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			if a.CreationTimestamp.Before(&b.CreationTimestamp) {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Name, b.Name)
	})
	decided := make(map[string]*apiextensionsv1.CustomResourceDefinition, len(members))
	for _, crd := range members {
		decided[crd.Name] = crd
	}
	var writes []*apiextensionsv1.CustomResourceDefinition
	for _, crd := range members {
		if crd.DeletionTimestamp != nil {
			continue
		}
		if next := decide(ix, decided, crd); next != nil {
			decided[crd.Name] = next
			writes = append(writes, next)
		}
	}
	if len(writes) == 0 {
		return nil
	}
	return c.write(ctx, writes)
}

// decide returns crd with the status it should have, nil if it has it.
func decide(ix *registry.Index, decided map[string]*apiextensionsv1.CustomResourceDefinition, crd *apiextensionsv1.CustomResourceDefinition) *apiextensionsv1.CustomResourceDefinition {
	next := crd.DeepCopy()
	names, namesCond, estCond := acceptNames(ix, decided, next)
	// As Kubernetes' naming controller, it writes when the names or the
	// NamesAccepted condition change, and Established only with them:
	// comparing Established too would undo the establishing below (a
	// CRD with an invalid caBundle: Installing, InvalidCABundle, Installing,
	// ... without end). The registry serves a CRD from the moment its
	// names are accepted, so names accepted for the first time establish
	// it in the same write (Kubernetes' establishing controller writes
	// Established True in a second one).
	if !reflect.DeepEqual(names, next.Status.AcceptedNames) ||
		!apihelpers.IsCRDConditionEquivalent(&namesCond, apihelpers.FindCRDCondition(next, apiextensionsv1.NamesAccepted)) {
		next.Status.AcceptedNames = names
		apihelpers.SetCRDCondition(next, namesCond)
		if estCond.Reason == "Installing" {
			estCond = establishedCondition(next)
		}
		apihelpers.SetCRDCondition(next, estCond)
		return next
	}
	// The registry serves the resource from the moment its names were
	// accepted: it is established.
	if namesCond.Status == apiextensionsv1.ConditionTrue && !apiextensions.IsEstablished(next) {
		est := establishedCondition(next)
		if apihelpers.IsCRDConditionEquivalent(&est, apihelpers.FindCRDCondition(next, apiextensionsv1.Established)) {
			return nil
		}
		apihelpers.SetCRDCondition(next, est)
		return next
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

// write stores the status of CRDs, writers at a time, then waits until
// the Index shows them: the next decision sees the names these accepted.
// A CRD changed meanwhile (a conflict) has its group synced again.
func (c *Controller) write(ctx context.Context, crds []*apiextensionsv1.CustomResourceDefinition) error {
	var (
		mu      sync.Mutex
		rev     int64
		failure error
		wg      sync.WaitGroup
		slots   = make(chan struct{}, writers)
	)
	for _, crd := range crds {
		slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-slots; wg.Done() }()
			out, err := c.client.ApiextensionsV1().CustomResourceDefinitions().UpdateStatus(ctx, crd, metav1.UpdateOptions{})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if failure == nil {
					failure = err
				}
				return
			}
			if r, err := strconv.ParseInt(out.ResourceVersion, 10, 64); err == nil && r > rev {
				rev = r
			}
		}()
	}
	wg.Wait()
	if rev > 0 {
		if err := c.reader.WaitApplied(ctx, rev); err != nil && failure == nil {
			failure = err
		}
	}
	return failure
}

// acceptNames decides which of a CRD's requested names it may have: a name
// another CRD of the group holds (in decided, the group's CRDs as decided
// so far) or a built-in resource of the group has is refused, as
// Kubernetes' naming controller does, and the CRD keeps the names it had.
func acceptNames(ix *registry.Index, decided map[string]*apiextensionsv1.CustomResourceDefinition, crd *apiextensionsv1.CustomResourceDefinition) (apiextensionsv1.CustomResourceDefinitionNames, apiextensionsv1.CustomResourceDefinitionCondition, apiextensionsv1.CustomResourceDefinitionCondition) {
	usedResources, usedKinds := sets.New[string](), sets.New[string]()
	for n, other := range decided {
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
