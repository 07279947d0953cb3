// Package rbac is the built-in rbac.authorization.k8s.io/v1 API: Roles,
// ClusterRoles and their bindings, validated as Kubernetes validates them,
// with its escalation checks (a role may not grant, nor a binding bind,
// more than its writer holds without the escalate or bind verb). The
// authorizer that decides with these objects is internal/auth/rbac.
package rbac
