package crdtest_test

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/crdserver/crdserver/crdtest"
)

var widgetsGVR = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}

// useServer creates a widget and lists it: what a test does with its
// server.
func useServer(ctx context.Context, srv *crdtest.Server) error {
	widgets := dynamic.NewForConfigOrDie(srv.Config).Resource(widgetsGVR).Namespace("default")
	if _, err := widgets.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Widget", "metadata": map[string]any{"name": "w"},
	}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	list, err := widgets.List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	if len(list.Items) != 1 {
		return fmt.Errorf("%d widgets", len(list.Items))
	}
	return nil
}

func TestStart(t *testing.T) {
	srv := crdtest.Start(t, crdtest.Options{CRDPaths: []string{"testdata", filepath.Join("testdata", "missing")}})
	if len(srv.CRDs) != 1 || srv.CRDs[0].Name != "widgets.example.com" {
		t.Fatalf("CRDs: %v", srv.CRDs)
	}
	if err := useServer(context.Background(), srv); err != nil {
		t.Fatal(err)
	}
}

func TestMissingPath(t *testing.T) {
	if _, err := crdtest.New(crdtest.Options{CRDPaths: []string{"testdata/missing"}, ErrorIfPathMissing: true}); err == nil {
		t.Fatal("a missing path was accepted")
	}
}

// WaitEstablished returns the CRDs once Established, and says which one
// never got there when ctx ends.
func TestWaitEstablished(t *testing.T) {
	srv := crdtest.Start(t, crdtest.Options{CRDPaths: []string{"testdata"}})
	got, err := crdtest.WaitEstablished(t.Context(), srv.Config, "widgets.example.com")
	if err != nil || len(got) != 1 || got[0].Name != "widgets.example.com" {
		t.Fatalf("WaitEstablished: %v, %v", got, err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	_, err = crdtest.WaitEstablished(ctx, srv.Config, "widgets.example.com", "gadgets.example.com")
	if err == nil || !strings.Contains(err.Error(), "CRD gadgets.example.com not Established") || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("a missing CRD: %v", err)
	}
}

// Many servers run side by side in one process, each on its own.
func TestParallel(t *testing.T) {
	for i := range 4 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			srv := crdtest.Start(t, crdtest.Options{CRDPaths: []string{"testdata"}})
			if err := useServer(context.Background(), srv); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// BenchmarkServer is one test's server: start, ready, its CRD Established,
// a create and a list, Close.
func BenchmarkServer(b *testing.B) {
	ctx := context.Background()
	for b.Loop() {
		srv, err := crdtest.New(crdtest.Options{CRDPaths: []string{"testdata"}})
		if err != nil {
			b.Fatal(err)
		}
		if err := useServer(ctx, srv); err != nil {
			b.Fatal(err)
		}
		if err := srv.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkServer8Parallel is eight such servers at once; slowest-ms is
// the longest any of them took, over all rounds.
func BenchmarkServer8Parallel(b *testing.B) {
	ctx := context.Background()
	var slowest time.Duration
	for b.Loop() {
		var wg sync.WaitGroup
		var mu sync.Mutex
		errs := make(chan error, 8*3)
		for range 8 {
			wg.Go(func() {
				t0 := time.Now()
				srv, err := crdtest.New(crdtest.Options{CRDPaths: []string{"testdata"}})
				if err != nil {
					errs <- err
					return
				}
				if err := useServer(ctx, srv); err != nil {
					errs <- err
				}
				if err := srv.Close(); err != nil {
					errs <- err
				}
				mu.Lock()
				slowest = max(slowest, time.Since(t0))
				mu.Unlock()
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(slowest.Milliseconds()), "slowest-ms")
}

// BenchmarkIdleMemory is the Go heap (and stacks) an idle server holds,
// with its CRD and one object, measured over four servers.
func BenchmarkIdleMemory(b *testing.B) {
	ctx := context.Background()
	for b.Loop() {
		before := heapInUse()
		var srvs []*crdtest.Server
		for range 4 {
			srv, err := crdtest.New(crdtest.Options{CRDPaths: []string{"testdata"}})
			if err != nil {
				b.Fatal(err)
			}
			if err := useServer(ctx, srv); err != nil {
				b.Fatal(err)
			}
			srvs = append(srvs, srv)
		}
		time.Sleep(500 * time.Millisecond)
		after := heapInUse()
		b.ReportMetric(float64(after-before)/4/(1<<20), "MiB/server")
		for _, s := range srvs {
			if err := s.Close(); err != nil {
				b.Fatal(err)
			}
		}
	}
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse + m.StackInuse
}
