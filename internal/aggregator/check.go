package aggregator

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"k8s.io/client-go/transport"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	"k8s.io/kube-aggregator/pkg/controllers/status/remote"
)

// checkTimeout bounds the availability check's request, as
// kube-aggregator's does.
const checkTimeout = 5 * time.Second

// Check tells whether an APIService with a service is available, as
// kube-aggregator's availability controller does: its service must be
// present (listed in --webhook-service-address) with its port, and must
// answer GET /apis/<group>/<version> with a 2xx or 3xx. It returns the
// Available condition (without its transition time).
func (a *Aggregator) Check(ctx context.Context, api *apiregistrationv1.APIService) apiregistrationv1.APIServiceCondition {
	cond := apiregistrationv1.APIServiceCondition{Type: apiregistrationv1.Available, Status: apiregistrationv1.ConditionTrue}
	ref := api.Spec.Service
	port := int32(443)
	if ref.Port != nil {
		port = *ref.Port
	}
	loc, err := a.Resolve(ref)
	switch {
	case errors.Is(err, ErrServiceNotFound):
		cond.Status, cond.Reason = apiregistrationv1.ConditionFalse, "ServiceNotFound"
		cond.Message = fmt.Sprintf("service/%s in %q is not present", ref.Name, ref.Namespace)
		return cond
	case errors.Is(err, ErrServicePort):
		cond.Status, cond.Reason = apiregistrationv1.ConditionFalse, "ServicePortError"
		cond.Message = fmt.Sprintf("service/%s in %q is not listening on port %d", ref.Name, ref.Namespace, port)
		return cond
	case err != nil:
		cond.Status, cond.Reason = apiregistrationv1.ConditionUnknown, "ServiceAccessError"
		cond.Message = fmt.Sprintf("service/%s in %q cannot be checked due to: %v", ref.Name, ref.Namespace, err)
		return cond
	}
	if err := a.checkDiscovery(ctx, api, loc.Host); err != nil {
		cond.Status, cond.Reason, cond.Message = apiregistrationv1.ConditionFalse, "FailedDiscoveryCheck", err.Error()
		return cond
	}
	cond.Reason, cond.Message = "Passed", "all checks passed"
	return cond
}

// checkDiscovery asks the backend at host for the APIService's
// discovery, as system:kube-aggregator in system:masters.
func (a *Aggregator) checkDiscovery(ctx context.Context, api *apiregistrationv1.APIService, host string) error {
	rt, err := transport.New(remote.BuildTransportConfig(nil, a.o.ProxyClientCert, a.o.ProxyClientKey, api))
	if err != nil {
		return err
	}
	u := "https://" + host + "/apis/" + api.Spec.Group + "/" + api.Spec.Version
	if api.Name == "v1." {
		u = "https://" + host + "/api/" + api.Spec.Version
	}
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	transport.SetAuthProxyHeaders(req, aggregatorUser, "", aggregatorGroups, nil)
	resp, err := (&http.Client{Transport: rt, CheckRedirect: noRedirect}).Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("timed out waiting for %v", u)
		}
		return fmt.Errorf("failing or missing response from %v: %w", u, err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode < http.StatusOK || resp.StatusCode >= http.StatusMultipleChoices {
		return fmt.Errorf("failing or missing response from %v: %w", u, fmt.Errorf("bad status from %v: %d", u, resp.StatusCode))
	}
	return nil
}
