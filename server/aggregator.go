package server

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/crdserver/crdserver/internal/aggregator"
)

// AggregatorOptions configure the aggregation of APIServices with a
// service (kube-apiserver's aggregator): what this server presents to the
// servers it proxies to, and how often their availability is checked.
// Services are found through Conversion.ServiceAddresses
// (--webhook-service-address).
type AggregatorOptions struct {
	// ProxyClientCertFile and ProxyClientKeyFile are the client
	// certificate the aggregated servers are called with
	// (kube-apiserver's --proxy-client-cert-file and
	// --proxy-client-key-file); it must be signed by the request header
	// CA they trust (RequestHeader.ClientCAFile, which the
	// extension-apiserver-authentication ConfigMap publishes). Without
	// them requests go without a client certificate.
	ProxyClientCertFile, ProxyClientKeyFile string
	// AvailabilityRecheck is how often an APIService with a service is
	// checked again (default 30 seconds, kube-aggregator's resync).
	AvailabilityRecheck time.Duration
}

// newAggregator makes the server's aggregator from its configuration.
func (s *Server) newAggregator() (*aggregator.Aggregator, error) {
	o := s.cfg.Aggregator
	opts := aggregator.Options{APIServices: s.builtin.APIServices, ServiceAddresses: s.cfg.Conversion.ServiceAddresses, Log: s.log}
	if (o.ProxyClientCertFile == "") != (o.ProxyClientKeyFile == "") {
		return nil, errors.New("the proxy client certificate and key are given together")
	}
	if o.ProxyClientCertFile != "" {
		var err error
		if opts.ProxyClientCert, err = os.ReadFile(o.ProxyClientCertFile); err != nil {
			return nil, fmt.Errorf("proxy client certificate: %w", err)
		}
		if opts.ProxyClientKey, err = os.ReadFile(o.ProxyClientKeyFile); err != nil {
			return nil, fmt.Errorf("proxy client key: %w", err)
		}
	}
	return aggregator.New(opts), nil
}
