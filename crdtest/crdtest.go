// Package crdtest gives a Go test a crdserver of its own, in process: a
// whole Kubernetes-compatible API server for custom resources, ready, with
// the test's CRDs installed and Established, and gone when the test ends.
// It is what envtest gives a controller's test suite, without downloading
// or running kube-apiserver and etcd: a server starts, takes its CRDs and
// closes in tens of milliseconds, so each test can have its own, and many
// run in parallel in one process.
//
//	func TestReconcile(t *testing.T) {
//		srv := crdtest.Start(t, crdtest.Options{CRDPaths: []string{"../config/crd/bases"}})
//		c, _ := client.New(srv.Config, client.Options{}) // controller-runtime, client-go, ...
//		...
//	}
//
// The server keeps its data in a directory of the test's (t.TempDir) and
// skips fsync, which a test does not need; Options.Server changes any
// other setting of the server.
//
// Install, WaitEstablished and ReadCRDs are what Start does with CRDs, for
// a server the test did not start with them (one it runs itself, or CRDs
// created later by kubectl, a chart or a controller): install CRDs, wait
// until CRDs are Established, read CRD manifests.
package crdtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/crdserver/crdserver/server"
)

// Options say what a test's server starts with.
type Options struct {
	// CRDPaths are files and directories of CRD manifests (YAML or JSON,
	// several documents a file; a directory's *.yaml, *.yml and *.json
	// files, not its subdirectories), as envtest's CRDDirectoryPaths.
	// Documents of other kinds are skipped.
	CRDPaths []string
	// ErrorIfPathMissing fails the start when a path of CRDPaths does not
	// exist (otherwise it is skipped, as envtest does by default).
	ErrorIfPathMissing bool
	// CRDs are more CRDs to install.
	CRDs []*apiextensionsv1.CustomResourceDefinition
	// Server changes the server's configuration before it starts (its
	// DataDir is a temporary directory, its port a free one).
	Server func(*server.Config)
	// Timeout bounds the start, including the CRDs (default 1 minute).
	Timeout time.Duration
}

// Server is a test's running crdserver.
type Server struct {
	*server.Server
	// Config is the admin's client configuration (HTTPS with a client
	// certificate of group system:masters), for client-go,
	// controller-runtime and the like.
	Config *rest.Config
	// CRDs are the installed CRDs, as the server stored them.
	CRDs []*apiextensionsv1.CustomResourceDefinition

	dir string // removed by Close (New's servers)
}

// Start starts a server for t and installs o's CRDs; it returns once the
// server is ready and every CRD is Established, and stops the server when
// t ends (t.Cleanup). Anything that goes wrong fails t.
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	srv, err := start(t.TempDir(), o)
	if err != nil {
		t.Fatalf("crdtest: %v", err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("crdtest: close: %v", err)
		}
	})
	return srv
}

// New starts a server outside of a test (a TestMain, an example, a
// program): as Start, but the caller closes it, and its data goes with it.
func New(o Options) (*Server, error) {
	dir, err := os.MkdirTemp("", "crdtest-")
	if err != nil {
		return nil, err
	}
	srv, err := start(dir, o)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	srv.dir = dir
	return srv, nil
}

// Close stops the server (and, for one of New, removes its data).
func (s *Server) Close() error {
	err := s.Server.Close()
	if s.dir != "" {
		if rerr := os.RemoveAll(s.dir); err == nil {
			err = rerr
		}
	}
	return err
}

// start is Start with the data in dir.
func start(dir string, o Options) (srv *Server, err error) {
	if o.Timeout <= 0 {
		o.Timeout = time.Minute
	}
	crds, err := ReadCRDs(o.CRDPaths, o.ErrorIfPathMissing)
	if err != nil {
		return nil, err
	}
	crds = append(crds, o.CRDs...)
	ctx, cancel := context.WithTimeout(context.Background(), o.Timeout)
	defer cancel()
	// API Priority and Fairness is off, as a test's few clients need no
	// fairness: its configuration controller's informers and status writes
	// would make each server slower to start and stop. Options.Server can
	// turn it on.
	cfg := server.Config{DataDir: dir, EtcdNoFsync: true, ShutdownTimeout: 5 * time.Second, DisablePriorityAndFairness: true}
	if o.Server != nil {
		o.Server(&cfg)
	}
	s, err := server.Start(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = s.Close()
		}
	}()
	if err := s.WaitReady(ctx); err != nil {
		return nil, err
	}
	out := &Server{Server: s, Config: s.RESTConfig()}
	if out.CRDs, err = Install(ctx, out.Config, crds...); err != nil {
		return nil, err
	}
	return out, nil
}

// Install creates CRDs on the server of cfg (or updates those that exist)
// and waits until every one is Established, its resources served.
func Install(ctx context.Context, cfg *rest.Config, crds ...*apiextensionsv1.CustomResourceDefinition) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	if len(crds) == 0 {
		return nil, nil
	}
	client, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	api := client.ApiextensionsV1().CustomResourceDefinitions()
	for _, crd := range crds {
		_, err := api.Create(ctx, crd.DeepCopy(), metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			cur, gerr := api.Get(ctx, crd.Name, metav1.GetOptions{})
			if gerr != nil {
				return nil, gerr
			}
			next := crd.DeepCopy()
			next.ResourceVersion = cur.ResourceVersion
			_, err = api.Update(ctx, next, metav1.UpdateOptions{})
		}
		if err != nil {
			return nil, fmt.Errorf("CRD %s: %w", crd.Name, err)
		}
	}
	names := make([]string, len(crds))
	for i, crd := range crds {
		names[i] = crd.Name
	}
	return WaitEstablished(ctx, cfg, names...)
}

// WaitEstablished waits until each named CRD on the server of cfg is
// Established (its Established condition True: its resources are
// served), and returns the CRDs as they were then, in the order of names.
// A CRD that does not exist yet is waited for, as one that is not
// Established yet; ctx bounds the wait, and its error says which CRD did
// not get there and what was last seen of it.
//
// Install waits with it; a test that has CRDs created some other way (by
// kubectl, a Helm chart, a controller, its own client) waits for them with
// it too.
func WaitEstablished(ctx context.Context, cfg *rest.Config, names ...string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	client, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	api := client.ApiextensionsV1().CustomResourceDefinitions()
	out := make([]*apiextensionsv1.CustomResourceDefinition, len(names))
	for i, name := range names {
		var last error
		var cur *apiextensionsv1.CustomResourceDefinition
		err := wait.PollUntilContextCancel(ctx, 5*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			got, err := api.Get(ctx, name, metav1.GetOptions{})
			if ctx.Err() != nil {
				return false, nil // what was seen before says more
			}
			if cur, last = got, err; err != nil {
				return false, nil
			}
			for _, c := range cur.Status.Conditions {
				if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
					out[i] = cur
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			switch {
			case last != nil:
				err = fmt.Errorf("%w (last get: %v)", err, last)
			case cur != nil:
				err = fmt.Errorf("%w (conditions: %+v)", err, cur.Status.Conditions)
			}
			return nil, fmt.Errorf("CRD %s not Established: %w", name, err)
		}
	}
	return out, nil
}

// ReadCRDs reads the CRDs of files and directories (see Options.CRDPaths).
func ReadCRDs(paths []string, errorIfMissing bool) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, p := range paths {
		st, err := os.Stat(p)
		if errors.Is(err, os.ErrNotExist) && !errorIfMissing {
			continue
		}
		if err != nil {
			return nil, err
		}
		files := []string{p}
		if st.IsDir() {
			entries, err := os.ReadDir(p)
			if err != nil {
				return nil, err
			}
			files = files[:0]
			for _, e := range entries {
				switch strings.ToLower(filepath.Ext(e.Name())) {
				case ".yaml", ".yml", ".json":
					if !e.IsDir() {
						files = append(files, filepath.Join(p, e.Name()))
					}
				}
			}
		}
		for _, f := range files {
			crds, err := readCRDFile(f)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			out = append(out, crds...)
		}
	}
	return out, nil
}

var crdKind = apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition")

func readCRDFile(name string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*apiextensionsv1.CustomResourceDefinition
	for {
		var doc map[string]any
		if err := dec.Decode(&doc); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, err
		}
		if doc == nil {
			continue
		}
		av, _ := doc["apiVersion"].(string)
		kind, _ := doc["kind"].(string)
		if gv, _ := schema.ParseGroupVersion(av); gv.WithKind(kind) != crdKind {
			continue
		}
		raw, err := yaml.Marshal(doc)
		if err != nil {
			return nil, err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(raw, crd); err != nil {
			return nil, err
		}
		out = append(out, crd)
	}
}
