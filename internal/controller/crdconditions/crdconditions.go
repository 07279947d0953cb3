// Package crdconditions runs Kubernetes' own CRD condition controllers
// from k8s.io/apiextensions-apiserver, unchanged, against the server's API:
// NonStructuralSchema (a CRD whose schema is not structural, such as one
// stored through v1beta1) and KubernetesAPIApprovalPolicyConformant (a CRD
// in a protected group, *.k8s.io or *.kubernetes.io, and its
// api-approved.kubernetes.io annotation). They watch CRDs with a client-go
// informer through the loopback client and write status through the API,
// as in kube-apiserver.
package crdconditions

import (
	"context"
	"log/slog"
	"time"

	"k8s.io/client-go/tools/cache"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apiextensionsinformers "k8s.io/apiextensions-apiserver/pkg/client/informers/externalversions"
	"k8s.io/apiextensions-apiserver/pkg/controller/apiapproval"
	"k8s.io/apiextensions-apiserver/pkg/controller/nonstructuralschema"
)

// Controller runs the condition controllers.
type Controller struct {
	client apiextensionsclient.Interface
	log    *slog.Logger
}

// New returns the controllers of the CRDs client reaches.
func New(client apiextensionsclient.Interface, log *slog.Logger) *Controller {
	return &Controller{client: client, log: log}
}

// Name implements controller.Controller.
func (c *Controller) Name() string { return "crd-conditions" }

// Run implements controller.Controller.
func (c *Controller) Run(ctx context.Context) {
	factory := apiextensionsinformers.NewSharedInformerFactory(c.client, 5*time.Minute)
	crds := factory.Apiextensions().V1().CustomResourceDefinitions()
	nonStructural := nonstructuralschema.NewConditionController(crds, c.client.ApiextensionsV1())
	approval := apiapproval.NewKubernetesAPIApprovalPolicyConformantConditionController(crds, c.client.ApiextensionsV1())
	// A watch that ends because the controller stops is no error.
	_ = crds.Informer().SetWatchErrorHandlerWithContext(func(wctx context.Context, r *cache.Reflector, err error) {
		if ctx.Err() == nil {
			cache.DefaultWatchErrorHandler(wctx, r, err)
		}
	})
	factory.Start(ctx.Done())
	done := make(chan struct{}, 2)
	go func() { nonStructural.RunWithContext(1, ctx); done <- struct{}{} }()
	go func() { approval.RunWithContext(1, ctx); done <- struct{}{} }()
	<-done
	<-done
	factory.Shutdown()
}
