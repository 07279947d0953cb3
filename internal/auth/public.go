package auth

import (
	"context"

	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// PublicInfo allows everyone, anonymous requests included, to read the
// server's health and version, as Kubernetes' system:public-info-viewer
// role does.
type PublicInfo struct{}

var publicPaths = map[string]bool{"/healthz": true, "/livez": true, "/readyz": true, "/version": true, "/version/": true}

// Authorize implements authorizer.Authorizer.
func (PublicInfo) Authorize(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	if !a.IsResourceRequest() && a.GetVerb() == "get" && publicPaths[a.GetPath()] {
		return authorizer.DecisionAllow, "", nil
	}
	return authorizer.DecisionNoOpinion, "", nil
}
