package server_test

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/crdserver/crdserver/server"
)

// TestCloseAfterClientUse: Close does not wait for the idle connections a
// client-go client keeps, and the server is gone after it.
func TestCloseAfterClientUse(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv, err := server.Start(ctx, server.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	client := kubernetes.NewForConfigOrDie(srv.RESTConfig())
	if _, err := client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	// The client's connection is closed: its next request fails at once
	// (a new connection is refused), and does not hang.
	rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
	defer rcancel()
	if _, err := client.CoreV1().Namespaces().List(rctx, metav1.ListOptions{}); err == nil {
		t.Fatal("the server answered after Close")
	}
}

// BenchmarkLifecycle is a controller test's server: start, ready, a
// client-go request, Close.
func BenchmarkLifecycle(b *testing.B) {
	ctx := context.Background()
	for b.Loop() {
		srv, err := server.Start(ctx, server.Config{DataDir: b.TempDir()})
		if err != nil {
			b.Fatal(err)
		}
		if err := srv.WaitReady(ctx); err != nil {
			b.Fatal(err)
		}
		client := kubernetes.NewForConfigOrDie(srv.RESTConfig())
		if _, err := client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		if err := srv.Close(); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(time.Since(t0).Milliseconds()), "close-ms")
	}
}
