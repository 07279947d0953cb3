package main

import (
	"flag"

	"github.com/crdserver/crdserver/server"
)

// aggregatorFlags registers kube-apiserver's flags of the aggregator on
// fs; the options they set are read after parsing.
func aggregatorFlags(fs *flag.FlagSet) *server.AggregatorOptions {
	o := &server.AggregatorOptions{}
	fs.StringVar(&o.ProxyClientCertFile, "proxy-client-cert-file", "", "client certificate (PEM) crdserver presents to aggregated API servers (APIServices with a service) when it proxies to them; it must be signed by the --requestheader-client-ca-file they trust")
	fs.StringVar(&o.ProxyClientKeyFile, "proxy-client-key-file", "", "private key (PEM) of --proxy-client-cert-file")
	return o
}
