package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// assetsDir lays out a directory as setup-envtest does: kube-apiserver,
// etcd and kubectl, here crdserver as kube-apiserver.
func assetsDir(t *testing.T, apiserver, etcd, kubectl string) string {
	t.Helper()
	dir := t.TempDir()
	for name, target := range map[string]string{"kube-apiserver": apiserver, "etcd": etcd, "kubectl": kubectl} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// processesOf lists the processes whose command line names a file of dir.
func processesOf(dir string) []string {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(cmdline) == 0 {
			continue
		}
		if args := bytes.Split(cmdline, []byte{0}); strings.HasPrefix(string(args[0]), dir+"/") {
			out = append(out, e.Name()+": "+string(bytes.Join(args, []byte(" "))))
		}
	}
	return out
}

// TestEnvtestAssets runs envtest as operators do, with its own control
// plane: crdserver is the kube-apiserver of a setup-envtest directory,
// found through Environment.BinaryAssetsDirectory or KUBEBUILDER_ASSETS.
// envtest runs `kube-apiserver --help`, starts etcd and crdserver with
// kube-apiserver's flags and its own certificates, installs the CRDs and
// adds users with client certificates of its CA; a reconciler works
// against it, a user without roles is refused by RBAC, and Stop leaves no
// process behind.
func TestEnvtestAssets(t *testing.T) {
	crtSetLogger(t)
	for _, how := range []string{"BinaryAssetsDirectory", "KUBEBUILDER_ASSETS"} {
		t.Run(how, func(t *testing.T) {
			dir := assetsDir(t, crdserverBin, etcdBin, kubectlBin)
			env := &envtest.Environment{
				CRDDirectoryPaths:     []string{"testdata/envtest-crds"},
				ErrorIfCRDPathMissing: true,
			}
			if how == "KUBEBUILDER_ASSETS" {
				t.Setenv("KUBEBUILDER_ASSETS", dir)
			} else {
				env.BinaryAssetsDirectory = dir
			}
			cfg, err := env.Start()
			if err != nil {
				t.Fatalf("envtest start: %v", err)
			}
			stopped := false
			// Registered first, so it runs after the manager stopped.
			t.Cleanup(func() {
				if stopped {
					return
				}
				if err := env.Stop(); err != nil {
					t.Errorf("envtest stop: %v", err)
				}
			})
			if len(env.CRDs) != 1 || env.CRDs[0].Name != "gadgets.envtest.example.com" {
				t.Fatalf("installed CRDs: %v", env.CRDs)
			}
			if procs := processesOf(dir); len(procs) != 2 {
				t.Errorf("processes of the assets: %q, want etcd and kube-apiserver", procs)
			}

			t.Run("reconciler", func(t *testing.T) { runGadgetReconciler(t, cfg) })

			// A user envtest adds, with no role: authenticated by its
			// client certificate, refused by RBAC.
			user, err := env.AddUser(envtest.User{Name: "alice", Groups: []string{"developers"}}, cfg)
			if err != nil {
				t.Fatal(err)
			}
			c, err := client.New(user.Config(), client.Options{})
			if err != nil {
				t.Fatal(err)
			}
			list := &unstructured.UnstructuredList{}
			list.SetGroupVersionKind(gadgetGVK.GroupVersion().WithKind("GadgetList"))
			err = c.List(t.Context(), list, client.InNamespace("default"))
			if !apierrors.IsForbidden(err) {
				t.Fatalf("alice's list: %v, want Forbidden", err)
			}
			want := `gadgets.envtest.example.com is forbidden: User "alice" cannot list resource "gadgets" in API group "envtest.example.com" in the namespace "default"`
			if !strings.Contains(err.Error(), want) {
				t.Errorf("alice's list: %v, want %q", err, want)
			}

			stopped = true
			if err := env.Stop(); err != nil {
				t.Fatalf("envtest stop: %v", err)
			}
			var left []string
			for range 50 {
				if left = processesOf(dir); len(left) == 0 {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if len(left) > 0 {
				t.Errorf("processes left after Stop: %q", left)
			}
		})
	}
}

// TestEnvtestStartStopTime measures envtest's Start and Stop with
// crdserver as kube-apiserver and with the kube-apiserver and etcd of
// $CRDSERVER_ENVTEST_KUBE_ASSETS (skipped without it): the median of
// three each, logged, not asserted.
func TestEnvtestStartStopTime(t *testing.T) {
	kubeAssets := os.Getenv("CRDSERVER_ENVTEST_KUBE_ASSETS")
	if kubeAssets == "" {
		t.Skip("CRDSERVER_ENVTEST_KUBE_ASSETS (a directory with kube-apiserver and etcd) not set")
	}
	crtSetLogger(t)
	dirs := map[string]string{
		"crdserver":      assetsDir(t, crdserverBin, etcdBin, kubectlBin),
		"kube-apiserver": assetsDir(t, filepath.Join(kubeAssets, "kube-apiserver"), filepath.Join(kubeAssets, "etcd"), kubectlBin),
	}
	for _, name := range []string{"crdserver", "kube-apiserver"} {
		var times []time.Duration
		for range 3 {
			env := &envtest.Environment{BinaryAssetsDirectory: dirs[name], CRDDirectoryPaths: []string{"testdata/envtest-crds"}, ErrorIfCRDPathMissing: true}
			start := time.Now()
			if _, err := env.Start(); err != nil {
				t.Fatalf("%s: envtest start: %v", name, err)
			}
			started := time.Since(start)
			if err := env.Stop(); err != nil {
				t.Fatalf("%s: envtest stop: %v", name, err)
			}
			times = append(times, time.Since(start))
			t.Logf("%s: Start %v, Start+Stop %v", name, started.Round(time.Millisecond), times[len(times)-1].Round(time.Millisecond))
		}
		sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
		t.Logf("%s: median Start+Stop %v", name, times[1].Round(time.Millisecond))
	}
}
