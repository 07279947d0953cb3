package server_test

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/crdserver/crdserver/server"
)

// TestRuntimeConfigAndAdmissionPlugins: a group version --runtime-config
// turns off is gone from discovery and not served; with NamespaceLifecycle
// off, an object may be created in a namespace that does not exist, as in
// kube-apiserver; with it on (the default) that is 404.
func TestRuntimeConfigAndAdmissionPlugins(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := func(cfg server.Config) kubernetes.Interface {
		t.Helper()
		cfg.DataDir = t.TempDir()
		srv, err := server.Start(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = srv.Close() })
		if err := srv.WaitReady(ctx); err != nil {
			t.Fatal(err)
		}
		return kubernetes.NewForConfigOrDie(srv.RESTConfig())
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "nowhere"}}

	off := start(server.Config{RuntimeConfig: map[string]string{"events.k8s.io/v1": "false"}, DisabledAdmissionPlugins: []string{"NamespaceLifecycle"}})
	groups, err := off.Discovery().ServerGroups()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, g := range groups.Groups {
		names = append(names, g.Name)
	}
	if slices.Contains(names, "events.k8s.io") || !slices.Contains(names, "rbac.authorization.k8s.io") {
		t.Errorf("groups served with events.k8s.io/v1=false: %v", names)
	}
	if _, err := off.EventsV1().Events("default").List(ctx, metav1.ListOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("events.k8s.io/v1 list: %v, want 404", err)
	}
	if _, err := off.CoreV1().ConfigMaps("nowhere").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Errorf("create in a missing namespace without NamespaceLifecycle: %v", err)
	}

	on := start(server.Config{})
	_, err = on.CoreV1().ConfigMaps("nowhere").Create(ctx, cm, metav1.CreateOptions{})
	if !apierrors.IsNotFound(err) || err.Error() != `namespaces "nowhere" not found` {
		t.Errorf("create in a missing namespace: %v, want 404 namespaces \"nowhere\" not found", err)
	}
	if _, err := on.EventsV1().Events("default").List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("events.k8s.io/v1 list by default: %v", err)
	}
}
