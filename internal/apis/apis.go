// Package apis registers every built-in API crdserver serves, in one
// place. Each group lives in its own package (core, rbac, authorization,
// apiextensions, storagemigration) with its strategy, table and validation;
// the engine (package resource) knows none of them by name.
package apis

import (
	rbacpolicy "github.com/crdserver/crdserver/internal/auth/rbac"

	"github.com/crdserver/crdserver/internal/apis/apiextensions"
	"github.com/crdserver/crdserver/internal/apis/authorization"
	"github.com/crdserver/crdserver/internal/apis/core"
	"github.com/crdserver/crdserver/internal/apis/rbac"
	"github.com/crdserver/crdserver/internal/apis/storagemigration"
	"github.com/crdserver/crdserver/internal/resource"
	"github.com/crdserver/crdserver/internal/store"
)

// Builtin is every built-in resource of one server.
type Builtin struct {
	// The resources others look up by what they are.
	Namespaces, CRDs, Migrations *resource.Resource
	// RBAC are ClusterRoles, Roles, ClusterRoleBindings and RoleBindings;
	// ClusterRoles is the first of them.
	RBAC         []*resource.Resource
	ClusterRoles *resource.Resource
	// All is every built-in resource, in the order of kube-apiserver's
	// discovery: core, authentication, authorization, rbac,
	// apiextensions, storagemigration.
	All []*resource.Resource
}

// New builds the built-in resources, each served from the watch cache
// newCache makes for its key prefix; RBAC writes are checked for escalation
// against policy.
func New(newCache func(prefix string) *store.Cache, policy *rbacpolicy.Store) *Builtin {
	b := &Builtin{
		Namespaces: core.Namespaces(newCache(core.NamespacePrefix)),
		CRDs:       apiextensions.CRDs(newCache(apiextensions.CRDPrefix)),
		Migrations: storagemigration.Migrations(newCache(storagemigration.Prefix)),
		RBAC:       rbac.Resources(newCache, policy),
	}
	b.ClusterRoles = b.RBAC[0]
	b.All = append(b.All, b.Namespaces)
	b.All = append(b.All, authorization.Reviews(policy)...)
	b.All = append(b.All, b.RBAC...)
	b.All = append(b.All, b.CRDs, b.Migrations)
	return b
}
