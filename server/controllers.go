package server

import (
	"context"
	"sync"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/crdserver/crdserver/internal/apis/core"
	"github.com/crdserver/crdserver/internal/controller"
	"github.com/crdserver/crdserver/internal/controller/clusterroles"
	"github.com/crdserver/crdserver/internal/controller/crdcleanup"
	"github.com/crdserver/crdserver/internal/controller/crdnames"
	"github.com/crdserver/crdserver/internal/controller/garbagecollector"
	"github.com/crdserver/crdserver/internal/controller/namespace"
	"github.com/crdserver/crdserver/internal/controller/storagemigration"
	"github.com/crdserver/crdserver/internal/resource"
)

// controllers are the controllers of one server.
type controllers struct {
	clusterRoles *clusterroles.Controller
	running      sync.WaitGroup
}

// startControllers creates the system namespaces (bounded by ctx), then
// runs every controller until runCtx ends. They call the server's API
// through cfg, the loopback config.
func (s *Server) startControllers(ctx, runCtx context.Context, cfg *rest.Config) (*controllers, error) {
	crds, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	ns := namespace.New(s.registry, s.builtin.Namespaces, dyn, s.log)
	if err := ns.EnsureSystemNamespaces(ctx); err != nil {
		return nil, err
	}
	c := &controllers{clusterRoles: clusterroles.New(s.builtin.ClusterRoles.Cache, dyn, s.log)}
	all := []controller.Controller{
		crdnames.New(s.registry, crds, s.log),
		crdcleanup.New(s.registry, crds, dyn, s.log),
		ns,
		garbagecollector.New(s.registry, dyn, s.log),
		storagemigration.New(s.registry, s.builtin.Migrations, crds, dyn, s.log),
		c.clusterRoles,
	}
	for _, ctl := range all {
		c.running.Add(1)
		go func() {
			defer c.running.Done()
			ctl.Run(runCtx)
		}()
	}
	return c, nil
}

// wait waits for the controllers to end (after runCtx).
func (c *controllers) wait() { c.running.Wait() }

// namespaceLifecycle is the NamespaceLifecycle check of creates.
func namespaceLifecycle(s *Server) resource.NamespaceChecker {
	return core.NamespaceLifecycle{Namespaces: s.builtin.Namespaces, Store: s.store}
}
