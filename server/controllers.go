package server

import (
	"context"
	"net"
	"sync"
	"time"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/client-go/dynamic"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	flowcontrolv1client "k8s.io/client-go/kubernetes/typed/flowcontrol/v1"
	"k8s.io/client-go/rest"

	"github.com/crdserver/crdserver/internal/admission"
	"github.com/crdserver/crdserver/internal/apis/corekinds"
	"github.com/crdserver/crdserver/internal/controller"
	"github.com/crdserver/crdserver/internal/controller/apiservice"
	"github.com/crdserver/crdserver/internal/controller/authinfo"
	"github.com/crdserver/crdserver/internal/controller/clusterroles"
	"github.com/crdserver/crdserver/internal/controller/crdcleanup"
	"github.com/crdserver/crdserver/internal/controller/crdconditions"
	"github.com/crdserver/crdserver/internal/controller/crdnames"
	"github.com/crdserver/crdserver/internal/controller/flowcontrol"
	"github.com/crdserver/crdserver/internal/controller/garbagecollector"
	"github.com/crdserver/crdserver/internal/controller/namespace"
	"github.com/crdserver/crdserver/internal/controller/rootca"
	"github.com/crdserver/crdserver/internal/controller/serviceaccounts"
	"github.com/crdserver/crdserver/internal/controller/storagemigration"
)

// controllers are the controllers of one server.
type controllers struct {
	leader  *controller.Leader
	running sync.WaitGroup
}

// startControllers creates the system namespaces (bounded by ctx), then,
// until runCtx ends, keeps the default RBAC policy in place and campaigns to
// lead: the replica elected runs every controller. They call the server's
// API through cfg, the loopback config.
func (s *Server) startControllers(ctx, runCtx context.Context, cfg *rest.Config) (*controllers, error) {
	crds, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	coordination, err := coordinationv1client.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	fc, err := flowcontrolv1client.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	// What every replica does (kube-apiserver does it on each): the system
	// namespaces and the default RBAC policy, written at the same time (the
	// roles in kube-system once it exists).
	c := &controllers{}
	if s.apf != nil {
		// API Priority and Fairness follows its configuration.
		c.running.Add(1)
		go func() {
			defer c.running.Done()
			s.apf.Run(runCtx)
		}()
	}
	c.running.Add(1)
	go func() {
		defer c.running.Done()
		_ = clusterroles.Bootstrap(runCtx, dyn, s.log)
	}()
	if err := namespace.New(s.registry, s.builtin.Namespaces, dyn, s.log).EnsureSystemNamespaces(ctx); err != nil {
		return nil, err
	}
	c.running.Add(1)
	go func() {
		defer c.running.Done()
		_ = clusterroles.BootstrapRoles(runCtx, dyn, s.log)
	}()
	if svc, err := corekinds.KubernetesService(s.cfg.ServiceClusterIPRanges, s.listener.Addr().(*net.TCPAddr).Port); err == nil {
		c.running.Add(1)
		go func() {
			defer c.running.Done()
			_ = corekinds.EnsureKubernetesService(runCtx, dyn, svc, time.Second, 30, s.log)
		}()
	}
	// What one replica does (kube-controller-manager's work): every
	// controller, new ones each term.
	c.leader = controller.NewLeader(s.cfg.LeaderElection.internal(), coordination, func() []controller.Controller {
		all := []controller.Controller{
			crdnames.New(s.registry, crds, s.log),
			crdconditions.New(s.registry, crds, s.log),
			crdcleanup.New(s.registry, crds, dyn, s.log),
			namespace.New(s.registry, s.builtin.Namespaces, dyn, s.log),
			garbagecollector.New(s.registry, dyn, s.log),
			serviceaccounts.New(s.builtin.Namespaces, s.builtin.ServiceAccounts, dyn, s.log),
			storagemigration.New(s.registry, s.builtin.Migrations, crds, dyn, s.log),
			clusterroles.NewAggregator(s.builtin.ClusterRoles.Cache, dyn, s.log),
			admission.TypeChecker{Admission: s.adm, Log: s.log},
			apiservice.NewLocal(s.registry, s.builtin.APIServices, s.agg, dyn, s.log),
			apiservice.NewAvailable(s.builtin.APIServices, s.agg, dyn, s.cfg.Aggregator.AvailabilityRecheck, s.log),
			flowcontrol.New(s.builtin.FlowSchemas, s.builtin.PriorityLevels, fc, s.log),
		}
		if s.tls != nil {
			// The CA clients verify the server with, and the client CAs
			// it trusts (none over plain HTTP).
			all = append(all, rootca.New(s.builtin.Namespaces, s.builtin.ConfigMaps, s.tls.caPEM, dyn, s.log),
				authinfo.New(s.builtin.ConfigMaps, s.authInfo(), dyn, s.log))
		}
		return all
	}, s.log)
	c.running.Add(1)
	go func() {
		defer c.running.Done()
		c.leader.Run(runCtx)
	}()
	return c, nil
}

// wait waits for the controllers to end (after runCtx).
func (c *controllers) wait() { c.running.Wait() }

// authInfo is what the authentication ConfigMap publishes about this
// server.
func (s *Server) authInfo() authinfo.Info {
	info := authinfo.Info{ClientCA: s.tls.clientCAPEM}
	if s.tls.proxyCAs != nil {
		rh := s.cfg.RequestHeader
		info.RequestHeaderCA = s.tls.proxyCAPEM
		info.AllowedNames, info.UsernameHeaders, info.UIDHeaders = rh.AllowedNames, rh.UsernameHeaders, rh.UIDHeaders
		info.GroupHeaders, info.ExtraHeaderPrefixes = rh.GroupHeaders, rh.ExtraHeaderPrefixes
	}
	return info
}
