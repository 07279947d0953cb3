package robustness

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// webhook is the gadgets' conversion webhook: v1's spec.value is v2's
// spec.data. It can be made to fail (every review answered 500) and to
// recover.
type webhook struct {
	srv     *http.Server
	url     string
	caPEM   []byte
	failing atomic.Bool
	calls   atomic.Int64
	failed  atomic.Int64
}

func startWebhook() (*webhook, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "robustness-webhook"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	w := &webhook{caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
	w.url = "https://" + ln.Addr().String() + "/convert"
	w.srv = &http.Server{
		Handler:           http.HandlerFunc(w.serve),
		ReadHeaderTimeout: 10 * time.Second,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}},
	}
	go func() { _ = w.srv.ServeTLS(ln, "", "") }()
	return w, nil
}

func (w *webhook) close() { _ = w.srv.Close() }

func (w *webhook) serve(rw http.ResponseWriter, r *http.Request) {
	w.calls.Add(1)
	if w.failing.Load() {
		w.failed.Add(1)
		http.Error(rw, "the robustness run made the webhook fail", http.StatusInternalServerError)
		return
	}
	var review apiextensionsv1.ConversionReview
	if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
		http.Error(rw, "bad review", http.StatusBadRequest)
		return
	}
	resp := &apiextensionsv1.ConversionResponse{UID: review.Request.UID, Result: metav1.Status{Status: metav1.StatusSuccess}}
	for _, raw := range review.Request.Objects {
		var obj map[string]any
		if err := json.Unmarshal(raw.Raw, &obj); err != nil {
			resp.Result = metav1.Status{Status: metav1.StatusFailure, Message: err.Error()}
			break
		}
		convertGadget(obj, review.Request.DesiredAPIVersion)
		out, _ := json.Marshal(obj)
		resp.ConvertedObjects = append(resp.ConvertedObjects, runtime.RawExtension{Raw: out})
	}
	review.Response, review.Request = resp, nil
	rw.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(rw).Encode(&review)
}

// convertGadget converts a gadget to apiVersion: v1 keeps the write ID in
// spec.value, v2 in spec.data.
func convertGadget(obj map[string]any, apiVersion string) {
	spec, _ := obj["spec"].(map[string]any)
	if spec != nil {
		from, to := "data", "value"
		if apiVersion == group+"/v2" {
			from, to = "value", "data"
		}
		if v, ok := spec[from]; ok {
			delete(spec, from)
			spec[to] = v
		}
	}
	obj["apiVersion"] = apiVersion
	// A webhook of Go types always answers with metadata (the field
	// manager converts objects pruned of theirs, which Kubernetes
	// refuses back without).
	if _, ok := obj["metadata"]; !ok {
		obj["metadata"] = map[string]any{}
	}
}
