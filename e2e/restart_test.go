package e2e

import (
	"strconv"
	"testing"
)

// TestRestartKeepsData stops crdserver and starts it again on the same data
// folder: the CRD and the CronTabs are still there, unchanged, and the
// server takes new writes.
func TestRestartKeepsData(t *testing.T) {
	srv := startServer(t)
	k := newKubectl(t, srv)
	installCRD(t, k)
	k.run(t, "create", "namespace", "e2e")
	k.run(t, "apply", "-f", cronTabFile)
	k.run(t, "apply", "-f", cronTabFile, "-n", "e2e")
	const identity = "jsonpath={.metadata.uid} {.metadata.resourceVersion} {.metadata.creationTimestamp} {.spec.cronSpec} {.spec.image}"
	before := k.run(t, "get", "crontab", cronTabName, "-o", identity)
	beforeCRD := k.run(t, "get", "crd", crdName, "-o", "jsonpath={.metadata.uid}")

	srv.stop(t)
	srv.start(t) // a new port, and a new admin.kubeconfig pointing at it

	mustEqual(t, "CRD uid after the restart", k.run(t, "get", "crd", crdName, "-o", "jsonpath={.metadata.uid}"), beforeCRD)
	k.run(t, "wait", "--for=condition=Established", "crd/"+crdName, "--timeout=60s")
	mustEqual(t, "CronTab after the restart", k.run(t, "get", "crontab", cronTabName, "-o", identity), before)
	mustEqual(t, "CronTabs in all namespaces after the restart",
		k.run(t, "get", "ct", "-A", "-o", `jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name}{"\n"}{end}`),
		"default/my-new-cron-object\ne2e/my-new-cron-object\n")
	tableRow(t, k.run(t, "get", "namespace"), "e2e")

	// Writes continue after the restart, with newer resourceVersions.
	rvBefore := k.run(t, "get", "crontab", cronTabName, "-o", "jsonpath={.metadata.resourceVersion}")
	k.run(t, "patch", "crontab", cronTabName, "--type=merge", "-p", `{"spec":{"replicas":9}}`)
	rvAfter := k.run(t, "get", "crontab", cronTabName, "-o", "jsonpath={.metadata.resourceVersion}")
	b, errB := strconv.ParseUint(rvBefore, 10, 64)
	a, errA := strconv.ParseUint(rvAfter, 10, 64)
	if errB != nil || errA != nil || a <= b {
		t.Errorf("resourceVersion went from %q to %q on a write after the restart; want it to grow", rvBefore, rvAfter)
	}
	mustEqual(t, "replicas after the patch", k.run(t, "get", "ct", cronTabName, "-o", "jsonpath={.spec.replicas}"), "9")
}
