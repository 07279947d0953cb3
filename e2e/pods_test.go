package e2e

import (
	"strings"
	"testing"
)

// TestKubectlPodDeletion deletes Pods with kubectl as kube-apiserver
// answers it (outputs compared with kube-apiserver v1.37.2): a Pod no node
// runs goes at once; one bound to a node stays, marked, for its grace
// period (no kubelet confirms here, as on a cluster whose node is gone)
// until it is force deleted.
func TestKubectlPodDeletion(t *testing.T) {
	srv := startServer(t)
	k := newKubectl(t, srv)
	k.runStdin(t, `apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  nodeName: node-a
  containers:
  - name: web
    image: nginx
---
apiVersion: v1
kind: Pod
metadata:
  name: idle
spec:
  containers:
  - name: idle
    image: nginx
`, "apply", "-f", "-")

	if out := k.run(t, "delete", "pod", "idle"); out != "pod \"idle\" deleted from default namespace\n" {
		t.Fatalf("delete idle: %q", out)
	}
	if out := k.run(t, "delete", "pod", "web", "--wait=false"); out != "pod \"web\" deleted from default namespace\n" {
		t.Fatalf("delete web: %q", out)
	}
	marked := k.run(t, "get", "pod", "web", "-o", "jsonpath={.metadata.deletionGracePeriodSeconds} {.metadata.deletionTimestamp}")
	if grace, ts, _ := strings.Cut(marked, " "); grace != "30" || ts == "" {
		t.Fatalf("web after delete: %q, want its grace period (30) and deletion time", marked)
	}

	r := k.exec("", "delete", "pod", "web", "--grace-period=0", "--force")
	if r.err != nil || r.stdout != "pod \"web\" force deleted from default namespace\n" ||
		!strings.Contains(r.stderr, "Warning: Immediate deletion does not wait for confirmation that the running resource has been terminated.") {
		t.Fatalf("force delete:\n%s", r)
	}
	if stderr := k.fail(t, "get", "pod", "web"); !strings.Contains(stderr, `Error from server (NotFound): pods "web" not found`) {
		t.Fatalf("web after force delete: %s", stderr)
	}
	if stderr := k.fail(t, "get", "pod", "idle"); !strings.Contains(stderr, `Error from server (NotFound): pods "idle" not found`) {
		t.Fatalf("idle after delete: %s", stderr)
	}
}
