package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	certutil "k8s.io/client-go/util/cert"
	"sigs.k8s.io/yaml"

	rulesv1alpha1 "github.com/crdserver/crdserver/internal/apis/conversionrules/v1alpha1"
	"github.com/crdserver/crdserver/internal/conversion"
)

// runConversionWebhook serves declarative conversion rules as an ordinary
// conversion webhook, so that a CRD converted by rules on crdserver works
// on a Kubernetes cluster too: `crdserver conversion-webhook --rules FILE`.
func runConversionWebhook(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("crdserver conversion-webhook", flag.ContinueOnError)
	fs.SetOutput(stderr)
	rulesFile := fs.String("rules", "", "a ConversionRules manifest (conversion.crdserver.io/v1alpha1, YAML or JSON), named after its CRD")
	bind := fs.String("bind-address", "127.0.0.1", "address to listen on")
	port := fs.Int("port", 9443, "port to listen on (0: any free port)")
	certFile := fs.String("tls-cert-file", "", "serving certificate (PEM); empty: a self-signed one is made")
	keyFile := fs.String("tls-private-key-file", "", "key of --tls-cert-file")
	certOut := fs.String("cert-out", "", "with a made certificate: write it here (PEM), for the CRD's caBundle")
	names := fs.String("dns-names", "localhost", "with a made certificate: its DNS names, comma-separated (127.0.0.1 and ::1 are always in it); add <service>.<namespace>.svc on a cluster")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: crdserver conversion-webhook --rules FILE [flags]\n\nServes ConversionReviews (apiextensions.k8s.io/v1 and v1beta1) on https://ADDRESS/convert with the rules of FILE.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *rulesFile == "" {
		fs.Usage()
		return errors.New("--rules is required")
	}
	data, err := os.ReadFile(*rulesFile)
	if err != nil {
		return err
	}
	var cr rulesv1alpha1.ConversionRules
	if err := yaml.UnmarshalStrict(data, &cr); err != nil {
		return fmt.Errorf("%s: %w", *rulesFile, err)
	}
	rules, err := conversion.RulesFromObject(cr.Name, cr.Spec)
	if err != nil {
		return fmt.Errorf("%s: %w", *rulesFile, err)
	}
	var cert tls.Certificate
	if *certFile != "" {
		cert, err = tls.LoadX509KeyPair(*certFile, *keyFile)
	} else {
		var certPEM, keyPEM []byte
		certPEM, keyPEM, err = certutil.GenerateSelfSignedCertKey("crdserver-conversion-webhook",
			[]net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")}, strings.Split(*names, ","))
		if err == nil {
			cert, err = tls.X509KeyPair(certPEM, keyPEM)
		}
		if err == nil && *certOut != "" {
			err = os.WriteFile(*certOut, certPEM, 0o644)
		}
	}
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/convert", conversion.RulesWebhook(rules))
	srv := &http.Server{
		Handler:           mux,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 10 * time.Second,
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(*bind, strconv.Itoa(*port)))
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "conversion webhook for %s serving on https://%s/convert\n", cr.Name, ln.Addr())
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.ServeTLS(ln, "", ""); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
