package e2e

import (
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestKubectlWorkloads drives the built-in workload and core kinds with
// kubectl's own generators, as a user of a cluster without nodes would:
// a Deployment created and scaled, exposed as a Service (a cluster IP from
// the default 10.0.0.0/24), a NodePort Service (a port of 30000-32767), a
// Job with its generated selector, `get all`, and a cluster IP given back
// when its Service is deleted. The answers are kube-apiserver v1.37.2's.
func TestKubectlWorkloads(t *testing.T) {
	srv := startServer(t)
	k := newKubectl(t, srv)
	const image = "registry.k8s.io/pause:3.10"

	mustEqual(t, "create deployment", k.run(t, "create", "deployment", "web", "--image="+image, "--replicas=2"), "deployment.apps/web created\n")
	mustEqual(t, "scale", k.run(t, "scale", "deployment", "web", "--replicas=3"), "deployment.apps/web scaled\n")
	mustEqual(t, "spec.replicas", k.run(t, "get", "deployment", "web", "-o", "jsonpath={.spec.replicas}"), "3")
	// kube's defaults, applied by the server.
	mustEqual(t, "strategy", k.run(t, "get", "deployment", "web", "-o", "jsonpath={.spec.strategy.type} {.spec.revisionHistoryLimit} {.spec.progressDeadlineSeconds}"), "RollingUpdate 10 600")
	if got := tableHeader(t, k.run(t, "get", "deployment", "web")); got != "NAME READY UP-TO-DATE AVAILABLE AGE" {
		t.Errorf("get deployment: header %q", got)
	}

	mustEqual(t, "expose", k.run(t, "expose", "deployment", "web", "--port=80", "--target-port=8080"), "service/web exposed\n")
	ip := k.run(t, "get", "service", "web", "-o", "jsonpath={.spec.clusterIP}")
	addr, err := netip.ParseAddr(ip)
	if err != nil || !netip.MustParsePrefix("10.0.0.0/24").Contains(addr) || addr == netip.MustParseAddr("10.0.0.1") {
		t.Fatalf("service/web's cluster IP %q: not one of 10.0.0.0/24 but the kubernetes Service's 10.0.0.1 (%v)", ip, err)
	}
	mustEqual(t, "selector and families", k.run(t, "get", "service", "web", "-o", "jsonpath={.spec.selector.app} {.spec.ipFamilies[0]} {.spec.ipFamilyPolicy}"), "web IPv4 SingleStack")
	if row := tableRow(t, k.run(t, "get", "services"), "web"); !slices.Equal(row[:5], []string{"web", "ClusterIP", ip, "<none>", "80/TCP"}) {
		t.Errorf("get services: row %q", row)
	}
	// A taken cluster IP is refused with kube's message.
	if out := k.fail(t, "create", "service", "clusterip", "taken", "--clusterip="+ip, "--tcp=80"); !strings.Contains(out, "provided IP is already allocated") {
		t.Errorf("a second Service on %s: %s", ip, out)
	}

	mustEqual(t, "create service nodeport", k.run(t, "create", "service", "nodeport", "np", "--tcp=80:8080"), "service/np created\n")
	port, err := strconv.Atoi(k.run(t, "get", "service", "np", "-o", "jsonpath={.spec.ports[0].nodePort}"))
	if err != nil || port < 30000 || port > 32767 {
		t.Errorf("service/np's node port %d: not of 30000-32767 (%v)", port, err)
	}

	mustEqual(t, "create job", k.run(t, "create", "job", "pi", "--image="+image), "job.batch/pi created\n")
	uid := k.run(t, "get", "job", "pi", "-o", "jsonpath={.metadata.uid}")
	mustEqual(t, "job selector", k.run(t, "get", "job", "pi", "-o", "jsonpath={.spec.selector.matchLabels.batch\\.kubernetes\\.io/controller-uid}"), uid)

	names := strings.Fields(k.run(t, "get", "all", "-o", "name"))
	for _, want := range []string{"service/kubernetes", "service/np", "service/web", "deployment.apps/web", "job.batch/pi"} {
		if !slices.Contains(names, want) {
			t.Errorf("get all -o name: %q lacks %s", names, want)
		}
	}

	// Deleted, the Service gives its IP back: another may ask for it.
	mustEqual(t, "delete service", k.run(t, "delete", "service", "web"), "service \"web\" deleted from default namespace\n")
	mustEqual(t, "create on the freed IP", k.run(t, "create", "service", "clusterip", "again", "--clusterip="+ip, "--tcp=80"), "service/again created\n")
}
