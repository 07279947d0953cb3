// Package apis registers every built-in API crdserver serves, in one
// place. Each group lives in its own package (core, events, rbac,
// authorization, admissionregistration, coordination, flowcontrol, apps,
// batch, policy, autoscaling, networking, discovery, corekinds (core
// Services, Endpoints, Pods, PersistentVolumeClaims), apiextensions,
// apiregistration, storagemigration) with its strategy, table and validation; the engine
// (package resource) knows none of them by name.
package apis

import (
	"context"
	"net"
	"strings"
	"sync"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	svmv1 "k8s.io/api/storagemigration/v1"
	svmv1beta1 "k8s.io/api/storagemigration/v1beta1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilnet "k8s.io/apimachinery/pkg/util/net"

	"github.com/crdserver/crdserver/internal/auth"
	rbacpolicy "github.com/crdserver/crdserver/internal/auth/rbac"

	"github.com/crdserver/crdserver/internal/apis/admissionregistration"
	"github.com/crdserver/crdserver/internal/apis/apiextensions"
	"github.com/crdserver/crdserver/internal/apis/apiregistration"
	"github.com/crdserver/crdserver/internal/apis/apps"
	"github.com/crdserver/crdserver/internal/apis/authorization"
	"github.com/crdserver/crdserver/internal/apis/autoscaling"
	"github.com/crdserver/crdserver/internal/apis/batch"
	"github.com/crdserver/crdserver/internal/apis/conversionrules"
	"github.com/crdserver/crdserver/internal/apis/coordination"
	"github.com/crdserver/crdserver/internal/apis/core"
	"github.com/crdserver/crdserver/internal/apis/corekinds"
	"github.com/crdserver/crdserver/internal/apis/discovery"
	"github.com/crdserver/crdserver/internal/apis/events"
	"github.com/crdserver/crdserver/internal/apis/flowcontrol"
	"github.com/crdserver/crdserver/internal/apis/networking"
	policyapi "github.com/crdserver/crdserver/internal/apis/policy"
	"github.com/crdserver/crdserver/internal/apis/rbac"
	"github.com/crdserver/crdserver/internal/apis/storagemigration"
	"github.com/crdserver/crdserver/internal/apis/versionreport"
	"github.com/crdserver/crdserver/internal/request"
	"github.com/crdserver/crdserver/internal/resource"
	"github.com/crdserver/crdserver/internal/serviceaccount"
	"github.com/crdserver/crdserver/internal/store"
)

var protobufOnce sync.Once

// Builtin is every built-in resource of one server.
type Builtin struct {
	// The resources others look up by what they are.
	Namespaces, Leases, CRDs, Migrations                   *resource.Resource
	ConfigMaps, Secrets, ServiceAccounts, Events, EventsV1 *resource.Resource
	ConversionRules                                        *resource.Resource
	// APIServices are apiregistration.k8s.io APIServices (the
	// aggregator's).
	APIServices *resource.Resource
	// FlowSchemas and PriorityLevels configure API Priority and Fairness.
	FlowSchemas, PriorityLevels *resource.Resource
	// AdmissionRegistration are the webhook configurations and the
	// admission policies and their bindings.
	AdmissionRegistration *admissionregistration.Resources
	// NamespaceTerminations are the namespaces this server marked
	// Terminating a moment ago (for the NamespaceLifecycle check).
	NamespaceTerminations *core.Terminations
	// RBAC are ClusterRoles, Roles, ClusterRoleBindings and RoleBindings;
	// ClusterRoles is the first of them.
	RBAC         []*resource.Resource
	ClusterRoles *resource.Resource
	// All is every built-in resource, in the order of kube-apiserver's
	// discovery (its group priorities): core, apiregistration, apps, events, authentication,
	// authorization, autoscaling, batch, networking, policy, rbac,
	// admissionregistration, apiextensions, coordination, discovery,
	// flowcontrol, storagemigration.
	All []*resource.Resource
}

// Options are what some built-in APIs need besides their caches.
type Options struct {
	// Store is read where a cache may lag (NamespaceLifecycle, the
	// objects a token names).
	Store store.Interface
	// EventTTL is how long an Event lives after its last write.
	EventTTL time.Duration
	// Tokens issues ServiceAccount tokens (nil: serviceaccounts/token is
	// not served).
	Tokens *serviceaccount.Tokens
	// Authenticator returns the server's authenticator, which answers
	// TokenReviews (nil: they are answered unchecked, as Kubernetes does
	// without one).
	Authenticator func() *auth.Authenticator
	// ServiceClusterIPRanges and ServiceNodePortRange are where Services'
	// cluster IPs and node ports come from (unset: kube-apiserver's
	// defaults, 10.0.0.0/24 and 30000-32767).
	ServiceClusterIPRanges []*net.IPNet
	ServiceNodePortRange   utilnet.PortRange
	// CRDChecks, when set, check CRD changes against the deprecation
	// policy, existing objects and ConversionRules (nil: not checked).
	CRDChecks *CRDChecks
	// VersionReports, when set, is what crdserver.io VersionReports are
	// made from (nil: they are not served).
	VersionReports func(ctx context.Context) (versionreport.Inputs, error)
}

// CRDChecks are what CRD changes are checked with, besides the
// ConversionRules the built-in APIs hold themselves.
type CRDChecks struct {
	// Enforce refuses every CRD change with findings.
	Enforce bool
	// ExistingObjects returns the stored objects of a CRD in a version (a
	// bounded number of them); nil checks none.
	ExistingObjects func(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, version string) []map[string]any
}

// New builds the built-in resources, each served from the watch cache
// newCache makes for its key prefix; RBAC writes are checked for escalation
// against policy.
func New(newCache func(prefix string) *store.Cache, policy *rbacpolicy.Store, o Options) *Builtin {
	protobufOnce.Do(func() {
		if err := request.AddProtobufTypes(corev1.AddToScheme, eventsv1.AddToScheme, authenticationv1.AddToScheme, authorizationv1.AddToScheme,
			rbacv1.AddToScheme, admissionregistrationv1.AddToScheme, coordinationv1.AddToScheme, flowcontrolv1.AddToScheme, apiextensionsv1.AddToScheme, svmv1.AddToScheme, svmv1beta1.AddToScheme, apiregistration.AddToScheme, apps.AddToScheme, autoscalingv1.AddToScheme,
			batch.AddToScheme, policyapi.AddToScheme, autoscaling.AddToScheme, networking.AddToScheme, discovery.AddToScheme); err != nil {
			panic(err)
		}
	})
	terms := &core.Terminations{}
	crdCache, rulesCache := newCache(apiextensions.CRDPrefix), newCache(conversionrules.Prefix)
	var compat *apiextensions.Compatibility
	if c := o.CRDChecks; c != nil {
		compat = &apiextensions.Compatibility{Enforce: c.Enforce, ExistingObjects: c.ExistingObjects, Conversion: conversionrules.CRDFindings(rulesCache)}
	}
	b := &Builtin{
		NamespaceTerminations: terms,
		Namespaces:            core.Namespaces(newCache(core.NamespacePrefix), terms),
		ConfigMaps:            core.ConfigMaps(newCache(core.ConfigMapPrefix)),
		Secrets:               core.Secrets(newCache(core.SecretPrefix)),
		Events:                core.Events(newCache(core.EventPrefix), o.EventTTL),
		Leases:                coordination.Leases(newCache(coordination.LeasePrefix)),
		CRDs:                  apiextensions.CRDs(crdCache, compat),
		Migrations:            storagemigration.Migrations(newCache(storagemigration.Prefix)),
		APIServices:           apiregistration.APIServices(newCache(apiregistration.Prefix)),
		RBAC:                  rbac.Resources(newCache, policy),
		FlowSchemas:           flowcontrol.FlowSchemas(newCache(flowcontrol.FlowSchemaPrefix)),
		PriorityLevels:        flowcontrol.PriorityLevels(newCache(flowcontrol.PriorityLevelPrefix)),
	}
	var tokens *core.TokenRequests
	saCache := newCache(core.ServiceAccountPrefix)
	if o.Tokens != nil {
		tokens = &core.TokenRequests{Tokens: o.Tokens}
	}
	b.ServiceAccounts = core.ServiceAccounts(saCache, tokens)
	if tokens != nil {
		tokens.Objects = b.TokenObjects(o.Store)
	}
	b.EventsV1 = events.Events(b.Events)
	b.ConversionRules = conversionrules.Resource(rulesCache, conversionrules.Options{CRD: apiextensions.Getter(crdCache)})
	b.ClusterRoles = b.RBAC[0]
	b.AdmissionRegistration = admissionregistration.New(newCache, admissionregistration.Options{
		Authorizer: auth.DefaultChain(policy),
		Resolve:    admissionregistration.Resolver(func() []*resource.Resource { return b.All }, b.CRDs.Cache),
	})
	authn := o.Authenticator
	if authn == nil {
		authn = func() *auth.Authenticator { return nil }
	}
	b.All = append(b.All, b.Namespaces, b.ConfigMaps, b.Secrets, b.ServiceAccounts, b.Events)
	b.All = append(b.All, corekinds.Resources(newCache, corekinds.NewServiceAllocation(o.Store, o.ServiceClusterIPRanges, o.ServiceNodePortRange))...)
	b.All = append(b.All, b.APIServices)
	b.All = append(b.All, apps.Resources(newCache)...)
	b.All = append(b.All, b.EventsV1)
	b.All = append(b.All, authorization.Reviews(policy, authn)...)
	b.All = append(b.All, autoscaling.Resources(newCache)...)
	b.All = append(b.All, batch.Resources(newCache)...)
	b.All = append(b.All, networking.Resources(newCache)...)
	b.All = append(b.All, policyapi.Resources(newCache)...)
	b.All = append(b.All, b.RBAC...)
	b.All = append(b.All, b.AdmissionRegistration.All()...)
	b.All = append(b.All, b.CRDs, b.Leases)
	b.All = append(b.All, discovery.Resources(newCache)...)
	b.All = append(b.All, b.FlowSchemas, b.PriorityLevels, b.Migrations, b.ConversionRules)
	if o.VersionReports != nil {
		b.All = append(b.All, versionreport.Resource(o.VersionReports))
	}
	return b
}

// TokenObjects finds the objects ServiceAccount tokens name.
func (b *Builtin) TokenObjects(st store.Interface) serviceaccount.Getter {
	return core.ObjectGetter{ServiceAccounts: b.ServiceAccounts, Secrets: b.Secrets, Store: st}
}

// Caches are the watch caches of the built-in resources (each once).
func (b *Builtin) Caches() []*store.Cache {
	var out []*store.Cache
	seen := map[*store.Cache]bool{}
	for _, r := range b.All {
		if r.Cache != nil && !seen[r.Cache] {
			seen[r.Cache] = true
			out = append(out, r.Cache)
		}
	}
	return out
}

// keyResources are the etcd key prefixes of the built-in resources that
// are stored, and the resource each holds (both Event APIs store core
// Events).
var keyResources = map[string]schema.GroupResource{
	core.NamespacePrefix:            {Resource: "namespaces"},
	core.ConfigMapPrefix:            {Resource: "configmaps"},
	core.SecretPrefix:               {Resource: "secrets"},
	core.ServiceAccountPrefix:       {Resource: "serviceaccounts"},
	core.EventPrefix:                {Resource: "events"},
	corekinds.ServicePrefix:         {Resource: "services"},
	corekinds.EndpointsPrefix:       {Resource: "endpoints"},
	corekinds.PodPrefix:             {Resource: "pods"},
	corekinds.PVCPrefix:             {Resource: "persistentvolumeclaims"},
	coordination.LeasePrefix:        {Group: coordinationv1.GroupName, Resource: "leases"},
	apps.DeploymentPrefix:           {Group: "apps", Resource: "deployments"},
	apps.ReplicaSetPrefix:           {Group: "apps", Resource: "replicasets"},
	apps.StatefulSetPrefix:          {Group: "apps", Resource: "statefulsets"},
	apps.DaemonSetPrefix:            {Group: "apps", Resource: "daemonsets"},
	apiextensions.CRDPrefix:         {Group: apiextensionsv1.GroupName, Resource: "customresourcedefinitions"},
	storagemigration.Prefix:         {Group: svmv1.GroupName, Resource: "storageversionmigrations"},
	apiregistration.Prefix:          {Group: apiregistration.Group, Resource: "apiservices"},
	flowcontrol.FlowSchemaPrefix:    {Group: flowcontrolv1.GroupName, Resource: "flowschemas"},
	flowcontrol.PriorityLevelPrefix: {Group: flowcontrolv1.GroupName, Resource: "prioritylevelconfigurations"},
	rbac.ClusterRolePrefix:          {Group: rbacv1.GroupName, Resource: "clusterroles"},
	rbac.RolePrefix:                 {Group: rbacv1.GroupName, Resource: "roles"},
	rbac.ClusterRoleBindingPrefix:   {Group: rbacv1.GroupName, Resource: "clusterrolebindings"},
	rbac.RoleBindingPrefix:          {Group: rbacv1.GroupName, Resource: "rolebindings"},

	admissionregistration.ValidatingWebhookConfigurationPrefix:   {Group: admissionregistrationv1.GroupName, Resource: "validatingwebhookconfigurations"},
	admissionregistration.MutatingWebhookConfigurationPrefix:     {Group: admissionregistrationv1.GroupName, Resource: "mutatingwebhookconfigurations"},
	admissionregistration.ValidatingAdmissionPolicyPrefix:        {Group: admissionregistrationv1.GroupName, Resource: "validatingadmissionpolicies"},
	admissionregistration.ValidatingAdmissionPolicyBindingPrefix: {Group: admissionregistrationv1.GroupName, Resource: "validatingadmissionpolicybindings"},
	admissionregistration.MutatingAdmissionPolicyPrefix:          {Group: admissionregistrationv1.GroupName, Resource: "mutatingadmissionpolicies"},
	admissionregistration.MutatingAdmissionPolicyBindingPrefix:   {Group: admissionregistrationv1.GroupName, Resource: "mutatingadmissionpolicybindings"},

	batch.JobPrefix:                           {Group: "batch", Resource: "jobs"},
	batch.CronJobPrefix:                       {Group: "batch", Resource: "cronjobs"},
	policyapi.PodDisruptionBudgetPrefix:       {Group: "policy", Resource: "poddisruptionbudgets"},
	autoscaling.HorizontalPodAutoscalerPrefix: {Group: "autoscaling", Resource: "horizontalpodautoscalers"},
	networking.IngressPrefix:                  {Group: "networking.k8s.io", Resource: "ingresses"},
	networking.IngressClassPrefix:             {Group: "networking.k8s.io", Resource: "ingressclasses"},
	networking.NetworkPolicyPrefix:            {Group: "networking.k8s.io", Resource: "networkpolicies"},
	discovery.EndpointSlicePrefix:             {Group: "discovery.k8s.io", Resource: "endpointslices"},
}

// KeyResource says which resource an etcd key holds: a built-in one, or a
// custom resource (/registry/<group>/<resource>/…, the group with a dot).
// Keys of no resource (crdserver's bookkeeping) say false.
func KeyResource(key string) (schema.GroupResource, bool) {
	rest, ok := strings.CutPrefix(key, "/registry/")
	if !ok {
		return schema.GroupResource{}, false
	}
	first, after, ok := strings.Cut(rest, "/")
	if !ok {
		return schema.GroupResource{}, false
	}
	if gr, ok := keyResources["/registry/"+first+"/"]; ok {
		return gr, true
	}
	if gr, ok := keyResources["/registry/"+first+"/"+strings.SplitN(after, "/", 2)[0]+"/"]; ok {
		return gr, true
	}
	second, _, ok := strings.Cut(after, "/")
	if !ok || !strings.Contains(first, ".") {
		return schema.GroupResource{}, false
	}
	return schema.GroupResource{Group: first, Resource: second}, true
}
