// Package apis registers every built-in API crdserver serves, in one
// place. Each group lives in its own package (core, rbac, authorization,
// coordination, apiextensions, storagemigration) with its strategy, table
// and validation; the engine (package resource) knows none of them by name.
package apis

import (
	"sync"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	svmv1 "k8s.io/api/storagemigration/v1"
	svmv1beta1 "k8s.io/api/storagemigration/v1beta1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	rbacpolicy "github.com/crdserver/crdserver/internal/auth/rbac"

	"github.com/crdserver/crdserver/internal/apis/apiextensions"
	"github.com/crdserver/crdserver/internal/apis/authorization"
	"github.com/crdserver/crdserver/internal/apis/coordination"
	"github.com/crdserver/crdserver/internal/apis/core"
	"github.com/crdserver/crdserver/internal/apis/rbac"
	"github.com/crdserver/crdserver/internal/apis/storagemigration"
	"github.com/crdserver/crdserver/internal/resource"
	"github.com/crdserver/crdserver/internal/store"
)

var protobufOnce sync.Once

// Builtin is every built-in resource of one server.
type Builtin struct {
	// The resources others look up by what they are.
	Namespaces, Leases, CRDs, Migrations *resource.Resource
	// NamespaceTerminations are the namespaces this server marked
	// Terminating a moment ago (for the NamespaceLifecycle check).
	NamespaceTerminations *core.Terminations
	// RBAC are ClusterRoles, Roles, ClusterRoleBindings and RoleBindings;
	// ClusterRoles is the first of them.
	RBAC         []*resource.Resource
	ClusterRoles *resource.Resource
	// All is every built-in resource, in the order of kube-apiserver's
	// discovery (its group priorities): core, authentication, authorization, rbac,
	// apiextensions, coordination, storagemigration.
	All []*resource.Resource
}

// New builds the built-in resources, each served from the watch cache
// newCache makes for its key prefix; RBAC writes are checked for escalation
// against policy.
func New(newCache func(prefix string) *store.Cache, policy *rbacpolicy.Store) *Builtin {
	protobufOnce.Do(func() {
		if err := resource.AddProtobufTypes(corev1.AddToScheme, authenticationv1.AddToScheme, authorizationv1.AddToScheme,
			rbacv1.AddToScheme, coordinationv1.AddToScheme, apiextensionsv1.AddToScheme, svmv1.AddToScheme, svmv1beta1.AddToScheme); err != nil {
			panic(err)
		}
	})
	terms := &core.Terminations{}
	b := &Builtin{
		NamespaceTerminations: terms,
		Namespaces:            core.Namespaces(newCache(core.NamespacePrefix), terms),
		Leases:                coordination.Leases(newCache(coordination.LeasePrefix)),
		CRDs:                  apiextensions.CRDs(newCache(apiextensions.CRDPrefix)),
		Migrations:            storagemigration.Migrations(newCache(storagemigration.Prefix)),
		RBAC:                  rbac.Resources(newCache, policy),
	}
	b.ClusterRoles = b.RBAC[0]
	b.All = append(b.All, b.Namespaces)
	b.All = append(b.All, authorization.Reviews(policy)...)
	b.All = append(b.All, b.RBAC...)
	b.All = append(b.All, b.CRDs, b.Leases, b.Migrations)
	return b
}
