// Command lossywebhook is a CRD conversion webhook that loses information
// on purpose, for the e2e test of `crdserver check-conversion`. It converts
// the Widgets of internal/fixtures/lossy-widgets.yaml between
// lossy.example.com/v1 and v2 with three planted losses, all on the way
// from v1 to v2:
//
//   - spec.legacyNote has no counterpart in v2: it is dropped;
//   - spec.tier (gold, silver, bronze, platinum) maps many-to-one to
//     spec.level (high, low), which maps back to gold and silver;
//   - spec.code, a string of digits in v1, is an integer in v2: "007"
//     comes back as "7".
//
// It serves HTTPS on /convert with a self-signed certificate it makes and
// writes to --cert-out, as examples/crontab-conversion does.
package main

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	certutil "k8s.io/client-go/util/cert"
)

const (
	v1 = "lossy.example.com/v1"
	v2 = "lossy.example.com/v2"
)

func main() {
	bind := flag.String("bind-address", "127.0.0.1", "address to listen on")
	port := flag.Int("port", 9443, "port to listen on")
	certOut := flag.String("cert-out", "", "write the generated certificate here (PEM), for the CRD's caBundle")
	flag.Parse()

	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("lossywebhook", []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")}, []string{"localhost"})
	if err != nil {
		log.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		log.Fatal(err)
	}
	if *certOut != "" {
		if err := os.WriteFile(*certOut, certPEM, 0o644); err != nil {
			log.Fatal(err)
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/convert", serve)
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
	fmt.Fprintf(os.Stderr, "lossy conversion webhook serving on https://%s/convert\n", ln.Addr())
	log.Fatal(srv.ServeTLS(ln, "", ""))
}

// serve answers one ConversionReview (v1 or v1beta1, in the version
// asked).
func serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var review apiextensionsv1.ConversionReview
	if err := json.Unmarshal(body, &review); err != nil || review.Request == nil {
		http.Error(w, fmt.Sprintf("not a ConversionReview: %v", err), http.StatusBadRequest)
		return
	}
	req := review.Request
	resp := &apiextensionsv1.ConversionResponse{UID: req.UID, Result: metav1.Status{Status: metav1.StatusSuccess}}
	for i, raw := range req.Objects {
		out, err := convert(raw.Raw, req.DesiredAPIVersion)
		if err != nil {
			resp.ConvertedObjects = nil
			resp.Result = metav1.Status{Status: metav1.StatusFailure, Message: fmt.Sprintf("object %d: %v", i, err)}
			break
		}
		resp.ConvertedObjects = append(resp.ConvertedObjects, runtime.RawExtension{Raw: out})
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(&apiextensionsv1.ConversionReview{TypeMeta: review.TypeMeta, Response: resp})
}

var (
	levelOf = map[string]string{"gold": "high", "platinum": "high", "silver": "low", "bronze": "low"}
	tierOf  = map[string]string{"high": "gold", "low": "silver"}
)

// convert converts one Widget to the version to.
func convert(raw []byte, to string) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil {
		return nil, err
	}
	from, _ := obj["apiVersion"].(string)
	if from == to {
		return raw, nil
	}
	spec, _ := obj["spec"].(map[string]any)
	out := map[string]any{}
	switch {
	case from == v1 && to == v2:
		for k, v := range spec {
			switch k {
			case "tier":
				out["level"] = levelOf[fmt.Sprint(v)]
			case "code":
				n, err := strconv.ParseInt(fmt.Sprint(v), 10, 64)
				if err != nil {
					return nil, fmt.Errorf("code %v: %v", v, err)
				}
				out["code"] = n
			case "legacyNote":
				// v2 has no such field.
			default:
				out[k] = v
			}
		}
	case from == v2 && to == v1:
		for k, v := range spec {
			switch k {
			case "level":
				out["tier"] = tierOf[fmt.Sprint(v)]
			case "code":
				out["code"] = fmt.Sprint(v)
			default:
				out[k] = v
			}
		}
	default:
		return nil, fmt.Errorf("cannot convert %s to %s", from, to)
	}
	if spec != nil {
		obj["spec"] = out
	}
	obj["apiVersion"] = to
	return json.Marshal(obj)
}
