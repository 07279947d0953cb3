package admission

import (
	"errors"
	"net"
	"net/url"
	"strconv"

	"github.com/crdserver/crdserver/internal/conversion"
)

// serviceResolver finds a webhook's service: where Options.ServiceAddresses
// says, or else at <name>.<namespace>.svc:<port> as Kubernetes' default
// resolver does. The webhook client keeps <name>.<namespace>.svc as the
// TLS server name either way.
type serviceResolver map[string]string

// ResolveEndpoint implements k8s.io/apiserver/pkg/util/webhook.ServiceResolver.
func (r serviceResolver) ResolveEndpoint(namespace, name string, port int32) (*url.URL, error) {
	if name == "" || namespace == "" || port == 0 {
		return nil, errors.New("cannot resolve an empty service name or namespace or port")
	}
	if addr, ok := r[conversion.ServiceKey(namespace, name, port)]; ok {
		return &url.URL{Scheme: "https", Host: addr}, nil
	}
	return &url.URL{Scheme: "https", Host: net.JoinHostPort(name+"."+namespace+".svc", strconv.Itoa(int(port)))}, nil
}
