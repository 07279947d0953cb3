// Command crontab-conversion is a CRD conversion webhook for the CronTab
// kind of the Kubernetes documentation (example.com, v1beta1 with hostPort
// ↔ v1 with host and port), built with crdserver's conversion/webhook
// package. It serves HTTPS on /convert with the certificate it is given,
// or with a self-signed one it makes (and writes to --cert-out, to put in
// the CRD's caBundle).
//
//	go run ./examples/crontab-conversion --port 9443 --cert-out /tmp/webhook.crt
package main

import (
	"crypto/tls"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	certutil "k8s.io/client-go/util/cert"

	"github.com/crdserver/crdserver/examples/crontab-conversion/crontab"
)

func main() {
	bind := flag.String("bind-address", "127.0.0.1", "address to listen on")
	port := flag.Int("port", 9443, "port to listen on")
	certFile := flag.String("tls-cert-file", "", "serving certificate (PEM); empty: generate a self-signed one")
	keyFile := flag.String("tls-private-key-file", "", "key of --tls-cert-file")
	certOut := flag.String("cert-out", "", "with a generated certificate: write it here (PEM), for the CRD's caBundle")
	names := flag.String("dns-names", "localhost,example-conversion-webhook-server.default.svc", "with a generated certificate: its DNS names (comma-separated); 127.0.0.1 and ::1 are always included")
	flag.Parse()

	var cert tls.Certificate
	var err error
	if *certFile != "" {
		cert, err = tls.LoadX509KeyPair(*certFile, *keyFile)
	} else {
		// client-go's helper makes a CA and a serving certificate signed
		// by it, for the loopback addresses and the DNS names.
		var certPEM, keyPEM []byte
		certPEM, keyPEM, err = certutil.GenerateSelfSignedCertKey("crontab-conversion",
			[]net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")}, strings.Split(*names, ","))
		if err == nil {
			cert, err = tls.X509KeyPair(certPEM, keyPEM)
		}
		if err == nil && *certOut != "" {
			err = os.WriteFile(*certOut, certPEM, 0o644)
		}
	}
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/convert", crontab.NewScheme())
	srv := &http.Server{
		Addr:              net.JoinHostPort(*bind, strconv.Itoa(*port)),
		Handler:           mux,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 10 * time.Second,
	}
	ln, err := net.Listen("tcp", srv.Addr)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Fprintf(os.Stderr, "crontab conversion webhook serving on https://%s/convert\n", ln.Addr())
	log.Fatal(srv.ServeTLS(ln, "", ""))
}
