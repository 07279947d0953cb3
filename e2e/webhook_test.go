package e2e

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The example conversion webhook (../examples/crontab-conversion), built
// the first time a test needs it, next to the binaries TestMain built.
var (
	webhookBuildOnce sync.Once
	webhookBin       string
	webhookBuildErr  error
)

func buildWebhook(t *testing.T) string {
	t.Helper()
	webhookBuildOnce.Do(func() {
		webhookBin = filepath.Join(filepath.Dir(crdserverBin), "crontab-conversion")
		webhookBuildErr = goBuild("..", webhookBin, "./examples/crontab-conversion")
	})
	if webhookBuildErr != nil {
		t.Fatal(webhookBuildErr)
	}
	return webhookBin
}

// webhook is one running crontab-conversion process.
type webhook struct {
	url    string // https://127.0.0.1:PORT/convert
	caPEM  []byte // its self-signed certificate, for the CRD's caBundle
	cmd    *exec.Cmd
	log    *syncBuffer
	exited chan struct{}
}

// startWebhook runs the example conversion webhook on a free loopback
// port with a certificate it makes, waits until it accepts TLS connections
// that verify against that certificate, and stops it when the test ends.
func startWebhook(t *testing.T) *webhook {
	t.Helper()
	return startWebhookWith(t, buildWebhook(t))
}

// startWebhookWith runs the webhook bin with args (and the flags of
// tryStartWebhook) as startWebhook does.
func startWebhookWith(t *testing.T, bin string, args ...string) *webhook {
	t.Helper()
	// The port is picked by closing a listener, so another process may
	// take it before the webhook binds it: then try another one.
	var errs []error
	for range 3 {
		w, err := tryStartWebhook(t, bin, args...)
		if err == nil {
			t.Cleanup(w.stop)
			t.Logf("conversion webhook is serving on %s", w.url)
			return w
		}
		errs = append(errs, err)
		if !errors.Is(err, errPortTaken) {
			break
		}
	}
	t.Fatalf("start the conversion webhook: %v", errors.Join(errs...))
	return nil
}

var errPortTaken = errors.New("port taken")

// tryStartWebhook runs bin with args and the flags both webhooks take
// (--bind-address, --port, --cert-out).
func tryStartWebhook(t *testing.T, bin string, args ...string) (*webhook, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	certFile := filepath.Join(t.TempDir(), "webhook.crt")
	w := &webhook{
		url:    "https://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) + "/convert",
		log:    &syncBuffer{},
		exited: make(chan struct{}),
	}
	w.cmd = exec.Command(bin, append(args, "--bind-address", "127.0.0.1", "--port", strconv.Itoa(port), "--cert-out", certFile)...)
	w.cmd.Stdout, w.cmd.Stderr = w.log, w.log
	if err := w.cmd.Start(); err != nil {
		return nil, err
	}
	var waitErr error
	go func() {
		waitErr = w.cmd.Wait()
		close(w.exited)
	}()

	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	deadline := time.After(startTimeout)
	last := "no certificate yet"
	for {
		if pemCert, err := os.ReadFile(certFile); err == nil {
			pool := x509.NewCertPool()
			if pool.AppendCertsFromPEM(pemCert) {
				err := dialTLS(addr, pool)
				if err == nil {
					w.caPEM = pemCert
					return w, nil
				}
				last = err.Error()
			}
		}
		select {
		case <-w.exited:
			err := fmt.Errorf("the webhook exited (%v); its output:\n%s", waitErr, w.log)
			if strings.Contains(w.log.String(), "address already in use") {
				err = fmt.Errorf("%w: %w", errPortTaken, err)
			}
			return nil, err
		case <-deadline:
			w.stop()
			return nil, fmt.Errorf("the webhook did not accept TLS connections on %s within %v (last: %s); its output:\n%s", addr, startTimeout, last, w.log)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// dialTLS makes one TLS connection to addr that verifies the server's
// certificate against roots and the address.
func dialTLS(addr string, roots *x509.CertPool) error {
	d := &net.Dialer{Timeout: 5 * time.Second}
	conn, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12})
	if err != nil {
		return err
	}
	return conn.Close()
}

// stop kills the webhook (it has no graceful shutdown) and waits for it.
func (w *webhook) stop() {
	select {
	case <-w.exited:
	default:
		_ = w.cmd.Process.Kill()
		<-w.exited
	}
}

// TestConversionExampleAsDocumented follows examples/crontab-conversion's
// README: the versioned CRD of crd.yaml, its URL and caBundle filled in
// with the webhook's, the v1beta1 object of crontab-v1beta1.yaml, read in
// both versions with kubectl.
func TestConversionExampleAsDocumented(t *testing.T) {
	srv := startServer(t)
	k := newKubectl(t, srv)
	w := startWebhook(t)
	crd, err := os.ReadFile("../examples/crontab-conversion/crd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	manifest := strings.NewReplacer("URL", w.url, "CABUNDLE", base64.StdEncoding.EncodeToString(w.caPEM)).Replace(string(crd))
	k.runStdin(t, manifest, "apply", "-f", "-")
	k.run(t, "wait", "--for=condition=Established", "crd/crontabs.example.com", "--timeout=60s")
	k.run(t, "apply", "-f", "../examples/crontab-conversion/crontab-v1beta1.yaml")
	if got := k.run(t, "get", "crontabs.v1beta1.example.com", "my-cron", "-o", "jsonpath={.hostPort}"); got != "localhost:7070" {
		t.Fatalf("v1beta1: %q", got)
	}
	if got := k.run(t, "get", "crontabs.v1.example.com", "my-cron", "-o", "jsonpath={.host} {.port}"); got != "localhost 7070" {
		t.Fatalf("v1: %q", got)
	}
}
