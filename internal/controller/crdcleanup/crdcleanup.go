// Package crdcleanup is the controller that empties a deleted
// CustomResourceDefinition: while it is Terminating with the
// customresourcecleanup.apiextensions.k8s.io finalizer, its objects are
// deleted through the API (their finalizers honoured), then the finalizer
// is removed so that the CRD goes, as Kubernetes' CRD finalizer controller
// does.
package crdcleanup

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/crdserver/crdserver/internal/apis/apiextensions"
	"github.com/crdserver/crdserver/internal/controller"
	"github.com/crdserver/crdserver/internal/registry"
	"github.com/crdserver/crdserver/internal/resource"
	"github.com/crdserver/crdserver/internal/store"
)

// Controller deletes the objects of deleted CRDs.
type Controller struct {
	reader  controller.Reader
	crds    apiextensionsclient.Interface
	dynamic dynamic.Interface
	log     *slog.Logger
	queue   controller.Queue
}

// New returns the controller; it writes through the two clients.
func New(reader controller.Reader, crds apiextensionsclient.Interface, dyn dynamic.Interface, log *slog.Logger) *Controller {
	return &Controller{reader: reader, crds: crds, dynamic: dyn, log: log, queue: controller.NewQueue("crd-cleanup")}
}

// Name implements controller.Controller.
func (c *Controller) Name() string { return "crd-cleanup" }

// Run implements controller.Controller.
func (c *Controller) Run(ctx context.Context) {
	first := true
	c.reader.Subscribe(func(ix *registry.Index) {
		names := ix.Changed
		if first || names == nil {
			first = false
			names = make([]string, 0, len(ix.CRDs))
			for name := range ix.CRDs {
				names = append(names, name)
			}
		}
		for _, name := range names {
			if crd := ix.CRDs[name]; crd != nil && crd.DeletionTimestamp != nil && apihelpers.CRDHasFinalizer(crd, apiextensionsv1.CustomResourceCleanupFinalizer) {
				c.queue.Add(name)
			}
		}
	})
	controller.Work(ctx, c.Name(), c.queue, 4, c.log, c.sync)
}

// stuckAfter is how long objects may remain before the CRD says it could
// not confirm that none does, as Kubernetes says after its minute of
// waiting.
const stuckAfter = time.Minute

// sync takes one step of a CRD's cleanup: mark it, delete its objects, and
// once none is left remove the finalizer. While objects remain (their own
// finalizers, or a delete that is still going) the CRD is looked at again.
// It works on the CRD as the Index has it, without its schemas (a write
// from a stale copy is a conflict, and the CRD is looked at again); a CRD
// that holds no object goes in one write.
func (c *Controller) sync(ctx context.Context, name string) error {
	crds := c.crds.ApiextensionsV1().CustomResourceDefinitions()
	ix := c.reader.Index()
	crd := ix.CRDs[name]
	if crd == nil || crd.DeletionTimestamp == nil || !apihelpers.CRDHasFinalizer(crd, apiextensionsv1.CustomResourceCleanupFinalizer) {
		return nil
	}
	crd = crd.DeepCopy()
	res := ix.CRDResources[name]
	servable := apiextensions.IsEstablished(crd) || apiextensions.Servable(crd)
	if servable && res == nil {
		return fmt.Errorf("the resource of CRD %s is not served yet", name)
	}
	term := apihelpers.FindCRDCondition(crd, apiextensionsv1.Terminating)
	inProgress := term != nil && term.Status == apiextensionsv1.ConditionTrue && (term.Reason == "InstanceDeletionInProgress" || term.Reason == "InstanceDeletionCheck")
	if !inProgress && servable && !empty(ctx, res) {
		apihelpers.SetCRDCondition(crd, apiextensionsv1.CustomResourceDefinitionCondition{
			Type: apiextensionsv1.Terminating, Status: apiextensionsv1.ConditionTrue,
			Reason: "InstanceDeletionInProgress", Message: "CustomResource deletion is in progress",
		})
		var err error
		if crd, err = crds.UpdateStatus(ctx, crd, metav1.UpdateOptions{}); err != nil {
			return err
		}
		term = apihelpers.FindCRDCondition(crd, apiextensionsv1.Terminating)
	}
	cond := apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.Terminating, Status: apiextensionsv1.ConditionFalse, Reason: "NeverEstablished", Message: "resource was never established"}
	if servable {
		left, err := controller.DeleteAll(ctx, c.dynamic, res, "")
		if err == nil && left == 0 {
			cond = apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.Terminating, Status: apiextensionsv1.ConditionFalse, Reason: "InstanceDeletionCompleted", Message: "removed all instances"}
		} else {
			if term != nil && time.Since(term.LastTransitionTime.Time) > stuckAfter && term.Reason != "InstanceDeletionCheck" {
				msg := fmt.Sprintf("could not confirm zero CustomResources remaining: %d remain", left)
				if err != nil {
					msg = fmt.Sprintf("could not confirm zero CustomResources remaining: %v", err)
				}
				apihelpers.SetCRDCondition(crd, apiextensionsv1.CustomResourceDefinitionCondition{
					Type: apiextensionsv1.Terminating, Status: apiextensionsv1.ConditionTrue, Reason: "InstanceDeletionCheck", Message: msg,
				})
				_, _ = crds.UpdateStatus(ctx, crd, metav1.UpdateOptions{})
			}
			if err != nil {
				return err
			}
			return controller.Requeue()
		}
	}
	apihelpers.SetCRDCondition(crd, cond)
	apihelpers.CRDRemoveFinalizer(crd, apiextensionsv1.CustomResourceCleanupFinalizer)
	if _, err := crds.UpdateStatus(ctx, crd, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}

// empty reports whether a resource's cache holds no object once it has
// every write made so far (an error or a wait too long: not known empty).
func empty(ctx context.Context, res *resource.Resource) bool {
	if res == nil || res.Cache == nil {
		return false
	}
	if err := res.Cache.WaitReady(ctx); err != nil {
		return false
	}
	return len(res.Cache.List(store.ListOptions{Limit: 1}).Items) == 0
}
