package apiservice

import (
	"context"
	"log/slog"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	"k8s.io/kube-aggregator/pkg/apis/apiregistration/v1/helper"

	"github.com/crdserver/crdserver/internal/aggregator"
	"github.com/crdserver/crdserver/internal/controller"
	"github.com/crdserver/crdserver/internal/resource"
	"github.com/crdserver/crdserver/internal/store"
)

var apiServicesGVR = apiregistrationv1.SchemeGroupVersion.WithResource("apiservices")

// DefaultRecheck is how often an APIService with a service is checked
// again by default (kube-aggregator's resync).
const DefaultRecheck = 30 * time.Second

// failedRecheck is how soon an APIService that failed its check is
// checked again (at most).
const failedRecheck = time.Second

// checkWorkers bounds the checks made at once.
const checkWorkers = 5

// Available keeps the APIServices' Available condition.
type Available struct {
	apiServices *resource.Resource
	agg         *aggregator.Aggregator
	dynamic     dynamic.Interface
	recheck     time.Duration
	log         *slog.Logger
	queue       controller.Queue
}

// NewAvailable returns the controller; it reads the APIServices' cache,
// checks services through agg and writes through dyn. recheck is how
// often an APIService with a service is checked again (0: DefaultRecheck).
func NewAvailable(apiServices *resource.Resource, agg *aggregator.Aggregator, dyn dynamic.Interface, recheck time.Duration, log *slog.Logger) *Available {
	if recheck <= 0 {
		recheck = DefaultRecheck
	}
	return &Available{apiServices: apiServices, agg: agg, dynamic: dyn, recheck: recheck, log: log, queue: controller.NewQueue("apiservice-availability")}
}

// Name implements controller.Controller.
func (c *Available) Name() string { return "apiservice-availability" }

// Run implements controller.Controller.
func (c *Available) Run(ctx context.Context) {
	go store.Follow(ctx, c.apiServices.Cache, func(items []*store.Item, _ int64) {
		for _, it := range items {
			c.queue.Add(it.Name)
		}
	}, func(ev store.Event) {
		if ev.Item != nil {
			c.queue.Add(ev.Item.Name)
		}
	})
	controller.Work(ctx, c.Name(), c.queue, checkWorkers, c.log, c.sync)
}

func (c *Available) sync(ctx context.Context, name string) error {
	orig := c.agg.APIService(name)
	if orig == nil {
		return nil
	}
	api := orig.DeepCopy()
	var cond apiregistrationv1.APIServiceCondition
	if api.Spec.Service == nil {
		cond = helper.NewLocalAvailableAPIServiceCondition()
	} else {
		cond = c.agg.Check(ctx, api)
		cond.LastTransitionTime = metav1.Now()
		next := c.recheck
		if cond.Status != apiregistrationv1.ConditionTrue {
			next = min(next, failedRecheck)
		}
		c.queue.AddAfter(name, next)
	}
	helper.SetAPIServiceCondition(api, cond)
	if equality.Semantic.DeepEqual(orig.Status, api.Status) {
		return nil
	}
	if old := helper.GetAPIServiceConditionByType(orig, apiregistrationv1.Available); old == nil || old.Status != cond.Status {
		c.log.Info("APIService availability changed", "name", name, "status", cond.Status, "reason", cond.Reason, "message", cond.Message)
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(api)
	if err != nil {
		return err
	}
	uo := &unstructured.Unstructured{Object: u}
	uo.SetAPIVersion(apiregistrationv1.SchemeGroupVersion.String())
	uo.SetKind("APIService")
	_, err = c.dynamic.Resource(apiServicesGVR).UpdateStatus(ctx, uo, metav1.UpdateOptions{})
	return err
}
