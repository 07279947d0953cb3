package auth

import (
	"context"
	"fmt"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/crdserver/crdserver/internal/auth/rbac"
)

// NodeAuthorizer is kube-apiserver's Node authorizer as it answers with
// no Nodes, Pods or volumes (crdserver serves none): it has no opinion
// about users other than kubelets (system:node:<name> in system:nodes);
// a kubelet may do what kube's static node rules allow and what concerns
// only its own name (its Node, its Lease, its CSINode, slices and pods
// selected by its name), and reading an object a kubelet would reach
// through a Pod bound to it (a Secret, a ConfigMap, a ServiceAccount's
// token, a PodCertificateRequest) finds no relationship.
type NodeAuthorizer struct{}

// Authorize implements authorizer.Authorizer.
func (NodeAuthorizer) Authorize(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	node, ok := nodeIdentity(a.GetUser())
	if !ok {
		return authorizer.DecisionNoOpinion, "", nil
	}
	if node == "" {
		return authorizer.DecisionNoOpinion, fmt.Sprintf("unknown node for user %q", a.GetUser().GetName()), nil
	}
	if a.IsResourceRequest() {
		verb, sub := a.GetVerb(), a.GetSubresource()
		switch a.GetAPIGroup() + "/" + a.GetResource() {
		case "/secrets", "/configmaps":
			return nodeRead(node, a)
		case "/persistentvolumeclaims":
			if sub == "status" {
				if verb != "update" && verb != "patch" {
					return authorizer.DecisionNoOpinion, "can only get/update/patch this type", nil
				}
				return nodeRelated(node, a)
			}
			return nodeGet(node, a)
		case "/persistentvolumes", "resource.k8s.io/resourceclaims", "storage.k8s.io/volumeattachments":
			return nodeGet(node, a)
		case "/serviceaccounts":
			if verb == "get" && sub == "" {
				return nodeRead(node, a)
			}
			if verb != "create" || a.GetName() == "" {
				return authorizer.DecisionNoOpinion, "can only create tokens for individual service accounts", nil
			}
			if sub != "token" {
				return authorizer.DecisionNoOpinion, "can only create token subresource of serviceaccount", nil
			}
			return authorizer.DecisionNoOpinion, noRelationship(node), nil
		case "coordination.k8s.io/leases":
			return nodeLease(node, a)
		case "storage.k8s.io/csinodes":
			return nodeCSINode(node, a)
		case "resource.k8s.io/resourceslices":
			return nodeSelected(node, a, "spec.nodeName", "cannot authorize ResourceSlice subresources",
				"can only list/watch/deletecollection resourceslices with nodeName field selector")
		case "certificates.k8s.io/podcertificaterequests":
			return nodePodCertificateRequest(node, a)
		case "/nodes":
			return nodeNode(node, a)
		case "/pods":
			return nodePod(node, a)
		}
	}
	for i := range nodeRules {
		if rbac.RuleAllows(a, &nodeRules[i]) {
			return authorizer.DecisionAllow, "", nil
		}
	}
	return authorizer.DecisionNoOpinion, "", nil
}

// nodeIdentity is the node a kubelet's user names, and whether the user
// is a kubelet at all.
func nodeIdentity(u user.Info) (string, bool) {
	if u == nil || !strings.HasPrefix(u.GetName(), "system:node:") {
		return "", false
	}
	for _, g := range u.GetGroups() {
		if g == user.NodesGroup {
			return strings.TrimPrefix(u.GetName(), "system:node:"), true
		}
	}
	return "", false
}

func noRelationship(node string) string {
	return fmt.Sprintf("no relationship found between node '%s' and this object", node)
}

// nodeRelated looks for a relationship to the node in an empty graph.
func nodeRelated(node string, a authorizer.Attributes) (authorizer.Decision, string, error) {
	if a.GetName() == "" {
		return authorizer.DecisionNoOpinion, "No Object name found", nil
	}
	return authorizer.DecisionNoOpinion, noRelationship(node), nil
}

func nodeGet(node string, a authorizer.Attributes) (authorizer.Decision, string, error) {
	if a.GetVerb() != "get" {
		return authorizer.DecisionNoOpinion, "can only get individual resources of this type", nil
	}
	if a.GetSubresource() != "" {
		return authorizer.DecisionNoOpinion, "cannot get subresource", nil
	}
	return nodeRelated(node, a)
}

func nodeRead(node string, a authorizer.Attributes) (authorizer.Decision, string, error) {
	switch a.GetVerb() {
	case "get", "list", "watch":
	default:
		return authorizer.DecisionNoOpinion, "can only read resources of this type", nil
	}
	if a.GetSubresource() != "" {
		return authorizer.DecisionNoOpinion, "cannot read subresource", nil
	}
	if a.GetNamespace() == "" {
		return authorizer.DecisionNoOpinion, "can only read namespaced object of this type", nil
	}
	return nodeRelated(node, a)
}

func nodeLease(node string, a authorizer.Attributes) (authorizer.Decision, string, error) {
	switch a.GetVerb() {
	case "get", "create", "update", "patch", "delete":
	default:
		return authorizer.DecisionNoOpinion, "can only get, create, update, patch, or delete a node lease", nil
	}
	if a.GetNamespace() != "kube-node-lease" {
		return authorizer.DecisionNoOpinion, `can only access leases in the "kube-node-lease" system namespace`, nil
	}
	if a.GetVerb() != "create" && a.GetName() != node {
		return authorizer.DecisionNoOpinion, "can only access node lease with the same name as the requesting node", nil
	}
	return authorizer.DecisionAllow, "", nil
}

func nodeCSINode(node string, a authorizer.Attributes) (authorizer.Decision, string, error) {
	switch a.GetSubresource() {
	case "":
		switch a.GetVerb() {
		case "get", "create", "update", "patch", "delete":
		default:
			return authorizer.DecisionNoOpinion, "can only get, create, update, patch, or delete a CSINode", nil
		}
	case "status":
		return authorizer.DecisionNoOpinion, "CSINode status access requires CSIVolumeHealth feature", nil
	default:
		return authorizer.DecisionNoOpinion, "cannot authorize CSINode subresources", nil
	}
	if a.GetVerb() != "create" && a.GetName() != node {
		return authorizer.DecisionNoOpinion, "can only access CSINode with the same name as the requesting node", nil
	}
	return authorizer.DecisionAllow, "", nil
}

// nodeSelected is a ResourceSlice's rule: created freely, read when
// related, listed with the node's own name as field selector.
func nodeSelected(node string, a authorizer.Attributes, field, subresourceReason, listReason string) (authorizer.Decision, string, error) {
	if a.GetSubresource() != "" {
		return authorizer.DecisionNoOpinion, subresourceReason, nil
	}
	switch a.GetVerb() {
	case "create":
		return authorizer.DecisionAllow, "", nil
	case "get", "update", "patch", "delete":
		return nodeRelated(node, a)
	case "watch", "list", "deletecollection":
		if selectsNode(a, field, node) {
			return authorizer.DecisionAllow, "", nil
		}
		return authorizer.DecisionNoOpinion, listReason, nil
	}
	return authorizer.DecisionNoOpinion, "only the following verbs are allowed for a ResourceSlice: get, watch, list, create, update, patch, delete, deletecollection", nil
}

func selectsNode(a authorizer.Attributes, field, node string) bool {
	reqs, _ := a.GetFieldSelector()
	for _, r := range reqs {
		if r.Field == field && r.Operator == selection.Equals && r.Value == node {
			return true
		}
	}
	return false
}

func nodePodCertificateRequest(node string, a authorizer.Attributes) (authorizer.Decision, string, error) {
	if a.GetSubresource() != "" {
		return authorizer.DecisionNoOpinion, "nodes may not access the status subresource of PodCertificateRequests", nil
	}
	switch a.GetVerb() {
	case "create":
		return authorizer.DecisionAllow, "", nil
	case "get":
		return nodeRelated(node, a)
	case "list", "watch":
		if selectsNode(a, "spec.nodeName", node) {
			return authorizer.DecisionAllow, "", nil
		}
		return authorizer.DecisionNoOpinion, "can only list/watch podcertificaterequests with nodeName field selector", nil
	}
	return authorizer.DecisionNoOpinion, fmt.Sprintf("nodes may not %s podcertificaterequests", a.GetVerb()), nil
}

func nodeNode(node string, a authorizer.Attributes) (authorizer.Decision, string, error) {
	switch a.GetSubresource() {
	case "":
		switch a.GetVerb() {
		case "create", "update", "patch":
			return authorizer.DecisionAllow, "", nil
		case "get", "list", "watch":
			switch a.GetName() {
			case node:
				return authorizer.DecisionAllow, "", nil
			case "":
				return authorizer.DecisionNoOpinion, fmt.Sprintf("node '%s' cannot read all nodes, only its own Node object", node), nil
			default:
				return authorizer.DecisionNoOpinion, fmt.Sprintf("node '%s' cannot read '%s', only its own Node object", node, a.GetName()), nil
			}
		}
	case "status":
		if v := a.GetVerb(); v == "update" || v == "patch" {
			return authorizer.DecisionAllow, "", nil
		}
	}
	return authorizer.DecisionNoOpinion, "", nil
}

func nodePod(node string, a authorizer.Attributes) (authorizer.Decision, string, error) {
	verb := a.GetVerb()
	switch a.GetSubresource() {
	case "":
		switch verb {
		case "get":
			return nodeGet(node, a)
		case "list", "watch":
			if selectsNode(a, "spec.nodeName", node) {
				return authorizer.DecisionAllow, "", nil
			}
			if a.GetName() != "" {
				return nodeRelated(node, a)
			}
			return authorizer.DecisionNoOpinion, "can only list/watch pods with spec.nodeName field selector", nil
		case "create", "delete":
			return authorizer.DecisionAllow, "", nil
		}
	case "status":
		if verb == "update" || verb == "patch" {
			return authorizer.DecisionAllow, "", nil
		}
	case "eviction":
		if verb == "create" {
			return authorizer.DecisionAllow, "", nil
		}
	}
	return authorizer.DecisionNoOpinion, "", nil
}

// nodeRules are kube-apiserver's static rules of kubelets, for the
// resources the Node authorizer does not decide itself.
var nodeRules = []rbacv1.PolicyRule{
	{Verbs: []string{"create"}, APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}},
	{Verbs: []string{"create"}, APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"subjectaccessreviews", "localsubjectaccessreviews"}},
	{Verbs: []string{"get", "list", "watch"}, APIGroups: []string{""}, Resources: []string{"services"}},
	{Verbs: []string{"create", "update", "patch"}, APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}},
	{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"endpoints"}},
	{Verbs: []string{"create", "get", "list", "watch"}, APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"certificatesigningrequests"}},
	{Verbs: []string{"get", "watch", "list"}, APIGroups: []string{"storage.k8s.io"}, Resources: []string{"csidrivers"}},
	{Verbs: []string{"get", "list", "watch"}, APIGroups: []string{"node.k8s.io"}, Resources: []string{"runtimeclasses"}},
	{Verbs: []string{"get", "update", "patch"}, APIGroups: []string{""}, Resources: []string{"persistentvolumeclaims/status"}},
}

// nodeRulesIncomplete is what the Node authorizer says when asked for a
// user's rules: a kubelet's are not enumerated.
func nodeRulesIncomplete(u user.Info) error {
	if _, ok := nodeIdentity(u); ok {
		return fmt.Errorf("node authorizer does not support user rule resolution")
	}
	return nil
}
