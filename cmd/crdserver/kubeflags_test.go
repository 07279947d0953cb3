package main

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"flag"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// parseKube parses args with the kube-apiserver flags and returns what
// they say, or the error.
func parseKube(t *testing.T, args ...string) (kubeSettings, int, error) {
	t.Helper()
	fs := flag.NewFlagSet("crdserver", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	port := fs.Int("port", 6443, "")
	k := addKubeAPIServerFlags(fs, port)
	if err := fs.Parse(args); err != nil {
		return kubeSettings{}, 0, err
	}
	s, err := k.settings(false)
	return s, *port, err
}

// TestKubeFlagsEnvtest: envtest's command line is accepted, with
// kube-apiserver's meaning.
func TestKubeFlagsEnvtest(t *testing.T) {
	dir := t.TempDir()
	s, port, err := parseKube(t, "--allow-privileged=true", "--cert-dir="+dir, "--disable-admission-plugins=ServiceAccount",
		"--secure-port=34567", "--service-cluster-ip-range=10.0.0.0/24")
	if err != nil {
		t.Fatal(err)
	}
	if port != 34567 {
		t.Errorf("--secure-port: port %d", port)
	}
	if !s.allowPrivileged {
		t.Error("--allow-privileged=true not recorded")
	}
	if s.certFile != filepath.Join(dir, "apiserver.crt") || s.keyFile != filepath.Join(dir, "apiserver.key") {
		t.Errorf("--cert-dir: %q %q", s.certFile, s.keyFile)
	}
	if len(s.disabledAdmission) != 0 {
		t.Errorf("disabled plugins crdserver implements: %v", s.disabledAdmission)
	}
	if len(s.serviceIPRanges) != 1 || s.serviceIPRanges[0].String() != "10.0.0.0/24" {
		t.Errorf("service ranges %v", s.serviceIPRanges)
	}
}

// TestKubeFlagsErrors: what kube-apiserver refuses is refused with its
// messages (checked against kube-apiserver v1.37.2).
func TestKubeFlagsErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--disable-admission-plugins=Foo"}, `disable-admission-plugins plugin "Foo" is unknown`},
		{[]string{"--enable-admission-plugins=Foo"}, `enable-admission-plugins plugin "Foo" is unknown`},
		{[]string{"--enable-admission-plugins=NamespaceLifecycle", "--disable-admission-plugins=NamespaceLifecycle"}, `[NamespaceLifecycle] in enable-admission-plugins and disable-admission-plugins overlapped`},
		{[]string{"--enable-admission-plugins=PodSecurity"}, `enable-admission-plugins plugin "PodSecurity" is not implemented by crdserver`},
		{[]string{"--service-cluster-ip-range=x"}, `service-cluster-ip-range[0] is not a valid cidr`},
		{[]string{"--service-cluster-ip-range=10.0.0.0/24,y"}, `service-cluster-ip-range[1] is not an ip net`},
		{[]string{"--service-cluster-ip-range=10.0.0.0/24,10.1.0.0/24"}, `--service-cluster-ip-range[0] and --service-cluster-ip-range[1] must be of different IP family`},
		{[]string{"--service-cluster-ip-range=10.0.0.0/24,fd00::/64,10.2.0.0/24"}, `--service-cluster-ip-range must not contain more than two entries`},
		{[]string{"--service-cluster-ip-range=10.0.0.0/31"}, `error determining service IP ranges for primary service cidr: the service cluster IP range must be at least 8 IP addresses`},
		{[]string{"--runtime-config=api/all=false"}, `invalid runtime-config with only api/all=false`},
		{[]string{"--runtime-config=api/all=maybe"}, `invalid value api/all=maybe`},
		{[]string{"--runtime-config=a/b/c/d=true"}, `runtime-config invalid key a/b/c/d`},
		{[]string{"--v=-1"}, `--v -1: want a level of 0 or more`},
	} {
		_, _, err := parseKube(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.args, err, c.want)
		}
	}
}

// TestKubeFlagsAccepted: dual-stack ranges, plugins crdserver does not
// implement turned off, and those it implements turned off by name.
func TestKubeFlagsAccepted(t *testing.T) {
	s, _, err := parseKube(t, "--service-cluster-ip-range=10.0.0.0/24,fd00::/108",
		"--disable-admission-plugins=ServiceAccount,ValidatingAdmissionWebhook,NamespaceLifecycle",
		"--enable-admission-plugins=MutatingAdmissionWebhook", "--runtime-config=api/all=false,v1=true,events.k8s.io/v1")
	if err != nil {
		t.Fatal(err)
	}
	if len(s.serviceIPRanges) != 2 || s.serviceIPRanges[1].String() != "fd00::/108" {
		t.Errorf("service ranges %v", s.serviceIPRanges)
	}
	if want := []string{"NamespaceLifecycle", "ValidatingAdmissionWebhook"}; !reflect.DeepEqual(s.disabledAdmission, want) {
		t.Errorf("disabled plugins %v, want %v", s.disabledAdmission, want)
	}
	if want := map[string]string{"api/all": "false", "v1": "true", "events.k8s.io/v1": ""}; !reflect.DeepEqual(s.runtimeConfig, want) {
		t.Errorf("runtime config %v, want %v", s.runtimeConfig, want)
	}
	if s, _, err := parseKube(t, "--service-node-port-range=31000-31099"); err != nil || s.nodePortRange.Base != 31000 || s.nodePortRange.Size != 100 {
		t.Errorf("node port range %v: %v", s.nodePortRange, err)
	}
	if s, _, err := parseKube(t, "-v", "4"); err != nil || s.verbosity != 4 {
		t.Errorf("-v 4: verbosity %d: %v", s.verbosity, err)
	}
	if s, _, _ := parseKube(t); s.nodePortRange.String() != "30000-32767" {
		t.Errorf("default node port range %v", s.nodePortRange)
	}
	// Without --service-cluster-ip-range, kube-apiserver's default.
	if s, _, _ := parseKube(t); len(s.serviceIPRanges) != 1 || s.serviceIPRanges[0].String() != "10.0.0.0/24" {
		t.Errorf("default service range %v", s.serviceIPRanges)
	}
}

// TestHelp: --help and -h print the flags, kube-apiserver's way
// ("--name type"), and succeed; envtest greps that output for
// --insecure-port, which must not be there.
func TestHelp(t *testing.T) {
	for _, arg := range []string{"--help", "-h"} {
		out := captureStdout(t, func() {
			if err := run([]string{arg}); err != nil {
				t.Errorf("%s: %v", arg, err)
			}
		})
		for _, f := range []string{"secure-port int", "cert-dir string", "etcd-servers string", "service-account-key-file value", "runtime-config value"} {
			if !regexp.MustCompile(`(?m)^\s*--` + regexp.QuoteMeta(f)).MatchString(out) {
				t.Errorf("%s: no --%s line in:\n%s", arg, f, out)
			}
		}
		if regexp.MustCompile(`(?m)^\s*--insecure-port\b`).MatchString(out) {
			t.Errorf("%s lists --insecure-port", arg)
		}
	}
}

func captureStdout(t *testing.T, f func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stdout
	os.Stdout = w
	done := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(r)
		done <- b
	}()
	f()
	os.Stdout = old
	_ = w.Close()
	return string(<-done)
}

// TestUnknownFlag: a flag crdserver lacks is refused by name, without the
// usage dump.
func TestUnknownFlag(t *testing.T) {
	err := run([]string{"--kubelet-client-certificate=x"})
	want := "unknown flag --kubelet-client-certificate: crdserver does not implement it"
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("got %v, want %q", err, want)
	}
}

// TestEnsureSelfSignedCert: a missing pair is made (a certificate for the
// host, with its CA, and its key), an existing one kept.
func TestEnsureSelfSignedCert(t *testing.T) {
	dir := t.TempDir()
	crt, key := filepath.Join(dir, "apiserver.crt"), filepath.Join(dir, "apiserver.key")
	ranges, err := serviceClusterIPRanges("10.0.0.0/24")
	if err != nil {
		t.Fatal(err)
	}
	if made, err := ensureSelfSignedCert(crt, key, "127.0.0.1", ranges); err != nil || !made {
		t.Fatalf("made %v, %v", made, err)
	}
	data, err := os.ReadFile(crt)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(data)
	if block == nil {
		t.Fatalf("no PEM in %s", crt)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if err := cert.VerifyHostname("127.0.0.1"); err != nil {
		t.Error(err)
	}
	if err := cert.VerifyHostname("10.0.0.1"); err != nil {
		t.Error(err)
	}
	if made, err := ensureSelfSignedCert(crt, key, "127.0.0.1", ranges); err != nil || made {
		t.Fatalf("made %v, %v", made, err)
	}
	again, _ := os.ReadFile(crt)
	if !bytes.Equal(again, data) {
		t.Error("an existing certificate was replaced")
	}
}
