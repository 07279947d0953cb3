package admission

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/initializer"
	admissionmetrics "k8s.io/apiserver/pkg/admission/metrics"
	mutatingpolicy "k8s.io/apiserver/pkg/admission/plugin/policy/mutating"
	validatingpolicy "k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	webhookinit "k8s.io/apiserver/pkg/admission/plugin/webhook/initializer"
	mutatingwebhook "k8s.io/apiserver/pkg/admission/plugin/webhook/mutating"
	validatingwebhook "k8s.io/apiserver/pkg/admission/plugin/webhook/validating"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/cel/openapi/resolver"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/openapi"
	"k8s.io/client-go/tools/cache"
)

// Options is what admission needs of the server.
type Options struct {
	// Client is a client of the server itself, with every right (the
	// loopback client): the plugins watch namespaces, the policies, their
	// bindings and the webhook configurations, and read namespaces and
	// params through it, and the mutating policies read the server's
	// /openapi/v3 with it.
	Client kubernetes.Interface
	// Dynamic is the same client, dynamic: params that are custom
	// resources are watched with it.
	Dynamic dynamic.Interface
	// RESTMapper maps a paramKind, and a policy's resource rules for type
	// checking, to resources. It should follow the CRDs as they come and
	// go; when it is a meta.ResettableRESTMapper it is reset every 30
	// seconds, as kube-apiserver resets its admission RESTMapper.
	RESTMapper meta.RESTMapper
	// Authorizer is the server's authorizer, behind the CEL authorizer
	// library of policies and match conditions.
	Authorizer authorizer.UnconditionalAuthorizer
	// ServiceAddresses says where webhook services are, as for conversion
	// webhooks: conversion.ServiceKey (namespace/name:port) → host:port.
	// A service not listed is dialled at <name>.<namespace>.svc:<port>,
	// as Kubernetes' default resolver does.
	ServiceAddresses map[string]string
	// OpenAPI, when set, is how the mutating policies' type converters
	// and the type checker read the server's OpenAPI v3 documents instead
	// of Client's /openapi/v3 (an in-process client that builds a
	// document only when it is read).
	OpenAPI openapi.Client
	// SchemaResolver resolves the schema of a kind for the type checking
	// of policies (RunTypeChecker). Default: the server's /openapi/v3,
	// through Client (resolver.ClientDiscoveryResolver), which covers
	// built-in resources and CRDs alike.
	SchemaResolver resolver.SchemaResolver
	// Registerer receives the admission metrics (apiserver_admission_*,
	// apiserver_validating_admission_policy_*,
	// apiserver_mutating_admission_policy_*, apiserver_webhooks_*).
	// Optional.
	Registerer prometheus.Registerer
	// APIServerID names this server in the plugins' metrics; default
	// "crdserver".
	APIServerID string
	// Disabled are plugins turned off, by name (ValidatingAdmissionWebhook
	// and the others of the plugin order).
	Disabled []string
	// Log receives what admission itself has to say (the plugins log
	// through klog, as in Kubernetes). Default: slog.Default().
	Log *slog.Logger
}

// pluginOrder is kube-apiserver's order of the plugins (k8s.io/kubernetes
// pkg/kubeapiserver/options/plugins.go AllOrderedPlugins): the mutating
// ones run in this order in the mutating phase, the validating ones in the
// validating phase.
var pluginOrder = []string{
	mutatingpolicy.PluginName,    // MutatingAdmissionPolicy
	mutatingwebhook.PluginName,   // MutatingAdmissionWebhook
	validatingpolicy.PluginName,  // ValidatingAdmissionPolicy
	validatingwebhook.PluginName, // ValidatingAdmissionWebhook
}

// enabledPlugins are the plugins of pluginOrder not disabled.
func (a *Admission) enabledPlugins() []string {
	var enabled []string
	for _, name := range pluginOrder {
		if !slices.Contains(a.o.Disabled, name) {
			enabled = append(enabled, name)
		}
	}
	return enabled
}

// ExcludedResources are the requests no policy and no webhook sees: the
// reviews, which are not persisted and whose interception could lock
// everyone out (kube-apiserver's list, k8s.io/kubernetes
// pkg/kubeapiserver/admission/exclusion).
var ExcludedResources = []schema.GroupResource{
	{Group: "authentication.k8s.io", Resource: "selfsubjectreviews"},
	{Group: "authentication.k8s.io", Resource: "tokenreviews"},
	{Group: "authorization.k8s.io", Resource: "localsubjectaccessreviews"},
	{Group: "authorization.k8s.io", Resource: "selfsubjectaccessreviews"},
	{Group: "authorization.k8s.io", Resource: "selfsubjectrulesreviews"},
	{Group: "authorization.k8s.io", Resource: "subjectaccessreviews"},
}

// informerResync is the resync period of kube-apiserver's shared informers.
const informerResync = 10 * time.Minute

// Admission runs the dynamic admission plugins. It implements
// admission.MutationInterface and admission.ValidationInterface; until
// Start has built the chain, every request is refused as Kubernetes refuses
// it before its admission plugins are ready.
type Admission struct {
	o        Options
	log      *slog.Logger
	resolver resolver.SchemaResolver
	// plugins is the client the plugins are given: Options.Client, reading
	// OpenAPI through Options.OpenAPI when set. The informers use
	// Options.Client itself (client-go tells a fake clientset from a real
	// one by methods a wrapper would hide).
	plugins kubernetes.Interface

	startOnce sync.Once
	chain     atomic.Pointer[chain]
	factory   informers.SharedInformerFactory // set by Start
	started   chan struct{}                   // closed once factory is set
}

// chain is the admission configuration, followed, and the plugins acting
// on it, built the first time they are needed: until a policy, binding or
// webhook configuration exists they would admit everything unchanged, and
// building them (the webhook plugins' CEL environments above all) is a
// good part of what a server's start costs.
type chain struct {
	// configs are the informers' stores of the policies, bindings and
	// webhook configurations the plugins act on.
	configs []cache.Store
	// build builds the plugins' chain (both a MutationInterface and a
	// ValidationInterface).
	build func() (admission.Interface, error)

	mu    sync.Mutex
	built atomic.Pointer[admission.Interface]
}

// plugins returns the plugins' chain, building it on first use.
func (c *chain) plugins() (admission.Interface, error) {
	if p := c.built.Load(); p != nil {
		return *p, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.built.Load(); p != nil {
		return *p, nil
	}
	p, err := c.build()
	if err != nil {
		return nil, err
	}
	c.built.Store(&p)
	return p, nil
}

// configured reports whether any policy, binding or webhook configuration
// exists: with none, the plugins admit everything unchanged.
func (c *chain) configured() bool {
	for _, s := range c.configs {
		if len(s.ListKeys()) > 0 {
			return true
		}
	}
	return false
}

var (
	_ admission.MutationInterface   = (*Admission)(nil)
	_ admission.ValidationInterface = (*Admission)(nil)
)

// New checks o and returns an Admission to Start.
func New(o Options) (*Admission, error) {
	switch {
	case o.Client == nil:
		return nil, errors.New("admission: no client")
	case o.Dynamic == nil:
		return nil, errors.New("admission: no dynamic client")
	case o.RESTMapper == nil:
		return nil, errors.New("admission: no RESTMapper")
	case o.Authorizer == nil:
		return nil, errors.New("admission: no authorizer")
	}
	if o.APIServerID == "" {
		o.APIServerID = "crdserver"
	}
	a := &Admission{o: o, log: o.Log, resolver: o.SchemaResolver, plugins: o.Client, started: make(chan struct{})}
	if o.OpenAPI != nil {
		a.plugins = clientWithOpenAPI{Interface: o.Client, openapi: o.OpenAPI}
	}
	if a.log == nil {
		a.log = slog.Default()
	}
	if a.resolver == nil {
		a.resolver = &resolver.ClientDiscoveryResolver{Discovery: a.plugins.Discovery()}
	}
	if o.Registerer != nil {
		if err := o.Registerer.Register(newMetricsCollector()); err != nil {
			var already prometheus.AlreadyRegisteredError
			if !errors.As(err, &already) {
				return nil, fmt.Errorf("admission: registering metrics: %w", err)
			}
		}
	}
	return a, nil
}

// Start starts the informers of the admission configuration (policies,
// bindings, webhook configurations) and of namespaces, and waits until
// these have listed everything. The plugins are built the first time a
// request needs them: once some configuration exists, or when Admit or
// Validate is called. When ctx ends first, Start returns an error
// (requests are refused until it has returned). All that Start starts,
// and the plugins, stop when ctx ends. Start may be called once.
func (a *Admission) Start(ctx context.Context) error {
	err := errors.New("admission: Start called twice")
	a.startOnce.Do(func() { err = a.start(ctx) })
	return err
}

func (a *Admission) start(ctx context.Context) error {
	stop := ctx.Done()
	factory := informers.NewSharedInformerFactory(a.o.Client, informerResync)
	// The informers the plugins use are synced before the plugins are
	// built: their policy sources then compile at once instead of polling
	// every 100 ms (client-go's WaitForCacheSync), and the server is ready
	// within milliseconds.
	configs, err := syncInformers(ctx, factory)
	if err != nil {
		return err
	}

	a.chain.Store(&chain{configs: configs, build: func() (admission.Interface, error) { return a.build(ctx, factory) }})
	a.factory = factory
	close(a.started)

	if r, ok := a.o.RESTMapper.(meta.ResettableRESTMapper); ok {
		go wait.Until(r.Reset, 30*time.Second, stop)
	}
	a.log.Info("admission started", "plugins", a.enabledPlugins())
	return nil
}

// build builds the plugins' chain on factory, whose informers of the
// configuration have synced, and waits until the informers the plugins
// ask for besides have synced too. The plugins run until ctx ends.
func (a *Admission) build(ctx context.Context, factory informers.SharedInformerFactory) (admission.Interface, error) {
	stop := ctx.Done()
	plugins := admission.NewPlugins()
	mutatingpolicy.Register(plugins)
	mutatingwebhook.Register(plugins)
	validatingpolicy.Register(plugins)
	validatingwebhook.Register(plugins)
	// What kube-apiserver's admission options (k8s.io/apiserver
	// pkg/server/options/admission.go ApplyTo) and its control plane
	// (k8s.io/kubernetes pkg/controlplane/apiserver/admission) give the
	// plugins. There is no admission configuration file: every plugin has
	// its default configuration.
	initializers := admission.PluginInitializers{
		initializer.NewAPIServerIDInitializer(a.o.APIServerID),
		initializer.New(a.plugins, a.o.Dynamic, factory, unconditional{a.o.Authorizer},
			utilfeature.DefaultFeatureGate, nil, stop, a.o.RESTMapper),
		webhookinit.NewPluginInitializer(nil, serviceResolver(a.o.ServiceAddresses)),
		excludedInitializer{},
	}
	decorators := admission.Decorators{admission.DecoratorFunc(admissionmetrics.WithControllerMetrics)}
	c, err := plugins.NewFromPlugins(a.enabledPlugins(), noConfig{}, initializers, decorators)
	if err != nil {
		return nil, fmt.Errorf("admission: %w", err)
	}
	factory.Start(stop) // what the plugins asked for besides
	for typ, ok := range factory.WaitForCacheSync(stop) {
		if !ok {
			return nil, fmt.Errorf("admission: the informer of %v has not synced: %w", typ, context.Cause(ctx))
		}
	}
	a.log.Info("admission plugins built", "plugins", a.enabledPlugins())
	return admissionmetrics.WithStepMetrics(c), nil
}

// syncInformers starts the informers of the admission configuration and
// of namespaces and waits, polling every millisecond, until they have
// synced. It returns the stores of the configuration.
func syncInformers(ctx context.Context, f informers.SharedInformerFactory) ([]cache.Store, error) {
	ar := f.Admissionregistration().V1()
	configs := []cache.SharedIndexInformer{
		ar.ValidatingAdmissionPolicies().Informer(),
		ar.ValidatingAdmissionPolicyBindings().Informer(),
		ar.MutatingAdmissionPolicies().Informer(),
		ar.MutatingAdmissionPolicyBindings().Informer(),
		ar.ValidatingWebhookConfigurations().Informer(),
		ar.MutatingWebhookConfigurations().Informer(),
	}
	all := append([]cache.SharedIndexInformer{f.Core().V1().Namespaces().Informer()}, configs...)
	f.Start(ctx.Done())
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for _, inf := range all {
		for !inf.HasSynced() {
			select {
			case <-ctx.Done():
				return nil, fmt.Errorf("admission: informers not synced: %w", context.Cause(ctx))
			case <-tick.C:
			}
		}
	}
	stores := make([]cache.Store, len(configs))
	for i, inf := range configs {
		stores[i] = inf.GetStore()
	}
	return stores, nil
}

// Handles implements admission.Interface: whether a request of op needs
// admission. Once started, it is false while no policy, binding or webhook
// configuration exists (the plugins would admit it unchanged), so that
// writes pay nothing for admission until it is configured.
func (a *Admission) Handles(op admission.Operation) bool {
	if c := a.chain.Load(); c != nil {
		if !c.configured() {
			return false
		}
		p, err := c.plugins()
		// A chain that cannot be built refuses the request (Admit).
		return err != nil || p.Handles(op)
	}
	return op == admission.Create || op == admission.Update || op == admission.Delete || op == admission.Connect
}

// Admit runs the mutating phase: MutatingAdmissionPolicies, then mutating
// webhooks, and both once more when reinvocation asks for it. attrs'
// object is changed in place. attrs should come from
// admission.NewAttributesRecord (audit annotations are collected there)
// and o from NewObjectInterfaces.
func (a *Admission) Admit(ctx context.Context, attrs admission.Attributes, o admission.ObjectInterfaces) error {
	p, err := a.pluginsFor(attrs)
	if err != nil {
		return err
	}
	return p.(admission.MutationInterface).Admit(ctx, attrs, o)
}

// pluginsFor returns the plugins' chain for a request: a Forbidden error
// before Start has followed the configuration, an internal error when the
// plugins cannot be built.
func (a *Admission) pluginsFor(attrs admission.Attributes) (admission.Interface, error) {
	c := a.chain.Load()
	if c == nil {
		return nil, admission.NewForbidden(attrs, errors.New("not yet ready to handle request"))
	}
	p, err := c.plugins()
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	return p, nil
}

// Validate runs the validating phase: ValidatingAdmissionPolicies, then
// validating webhooks, on the final object (after mutation, defaulting
// and schema validation).
func (a *Admission) Validate(ctx context.Context, attrs admission.Attributes, o admission.ObjectInterfaces) error {
	p, err := a.pluginsFor(attrs)
	if err != nil {
		return err
	}
	return p.(admission.ValidationInterface).Validate(ctx, attrs, o)
}

// noConfig gives every plugin no configuration file.
type noConfig struct{}

func (noConfig) ConfigFor(string) (io.Reader, error) { return nil, nil }

// excludedInitializer gives the plugins the resources they must never see,
// as kube-apiserver's control-plane initializer does.
type excludedInitializer struct{}

func (excludedInitializer) Initialize(p admission.Interface) {
	if w, ok := p.(initializer.WantsExcludedAdmissionResources); ok {
		w.SetExcludedAdmissionResources(ExcludedResources)
	}
}

// unconditional makes crdserver's authorizer, which knows no conditions,
// an authorizer.Authorizer, as that interface asks of such authorizers.
type unconditional struct {
	authorizer.UnconditionalAuthorizer
}

func (u unconditional) ConditionsAwareAuthorize(ctx context.Context, attrs authorizer.Attributes) authorizer.ConditionsAwareDecision {
	return authorizer.ConditionsAwareDecisionFromParts(u.Authorize(ctx, attrs))
}

func (unconditional) EvaluateConditions(context.Context, authorizer.ConditionsAwareDecision, authorizer.ConditionsData) (authorizer.Decision, string, error) {
	return authorizer.DecisionDeny, "", authorizer.ErrorConditionEvaluationNotSupported
}

// clientWithOpenAPI is a clientset whose discovery client reads OpenAPI v3
// documents through another client.
type clientWithOpenAPI struct {
	kubernetes.Interface
	openapi openapi.Client
}

func (c clientWithOpenAPI) Discovery() discovery.DiscoveryInterfaces {
	return discoveryWithOpenAPI{DiscoveryInterfaces: c.Interface.Discovery(), openapi: c.openapi}
}

type discoveryWithOpenAPI struct {
	discovery.DiscoveryInterfaces
	openapi openapi.Client
}

func (d discoveryWithOpenAPI) OpenAPIV3() openapi.Client { return d.openapi }

func (d discoveryWithOpenAPI) OpenAPIV3WithContext(context.Context) openapi.ClientWithContext {
	return openapi.ToClientWithContext(d.openapi)
}
