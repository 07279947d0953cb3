package e2e

import (
	"regexp"
	"strings"
	"testing"
)

// holdsCRD is a namespaced custom resource for objects that hold their
// namespace with a finalizer.
const holdsCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: holds.nsconds.example.com
spec:
  group: nsconds.example.com
  names: {plural: holds, singular: hold, kind: Hold, listKind: HoldList}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
`

const heldHold = `apiVersion: nsconds.example.com/v1
kind: Hold
metadata: {name: h1, finalizers: ["example.com/hold"]}
`

// What `kubectl describe ns` printed against kube-apiserver and
// kube-controller-manager v1.37.2 for the same commands, up to the end of
// the conditions (the times are replaced by <time>).
const (
	describeStuckConfigMap = `Name:         nsc-cm
Labels:       kubernetes.io/metadata.name=nsc-cm
Annotations:  <none>
Status:       Terminating
Conditions:
  Type                                         Status  LastTransitionTime               Reason                Message
  ----                                         ------  ------------------               ------                -------
  NamespaceDeletionDiscoveryFailure            False   <time>  ResourcesDiscovered   All resources successfully discovered
  NamespaceDeletionGroupVersionParsingFailure  False   <time>  ParsedGroupVersions   All legacy kube types successfully parsed
  NamespaceDeletionContentFailure              False   <time>  ContentDeleted        All content successfully deleted, may be waiting on finalization
  NamespaceContentRemaining                    True    <time>  SomeResourcesRemain   Some resources are remaining: configmaps. has 1 resource instances
  NamespaceFinalizersRemaining                 True    <time>  SomeFinalizersRemain  Some content in the namespace has finalizers remaining: example.com/hold in 1 resource instances
`
	describeStuckHold = `Name:         nsc-cr
Labels:       kubernetes.io/metadata.name=nsc-cr
Annotations:  <none>
Status:       Terminating
Conditions:
  Type                                         Status  LastTransitionTime               Reason                Message
  ----                                         ------  ------------------               ------                -------
  NamespaceDeletionDiscoveryFailure            False   <time>  ResourcesDiscovered   All resources successfully discovered
  NamespaceDeletionGroupVersionParsingFailure  False   <time>  ParsedGroupVersions   All legacy kube types successfully parsed
  NamespaceDeletionContentFailure              False   <time>  ContentDeleted        All content successfully deleted, may be waiting on finalization
  NamespaceContentRemaining                    True    <time>  SomeResourcesRemain   Some resources are remaining: holds.nsconds.example.com has 1 resource instances
  NamespaceFinalizersRemaining                 True    <time>  SomeFinalizersRemain  Some content in the namespace has finalizers remaining: example.com/hold in 1 resource instances
`
)

// describeTime is a condition's time as kubectl describe prints it.
var describeTime = regexp.MustCompile(`[A-Z][a-z]{2}, \d{2} [A-Z][a-z]{2} \d{4} \d{2}:\d{2}:\d{2} [+-]\d{4}`)

// describedConditions is `kubectl describe ns` output up to the end of
// the conditions, with the times replaced by <time>.
func describedConditions(out string) string {
	out = describeTime.ReplaceAllString(out, "<time>")
	head, _, _ := strings.Cut(out, "\n\n")
	return strings.TrimRight(head, "\n") + "\n"
}

// TestKubectlDescribeStuckNamespace deletes namespaces held by a
// ConfigMap's and a custom resource's finalizer: kubectl describe shows
// the conditions kube-controller-manager sets, word for word, and the
// namespaces go once the finalizers are removed.
func TestKubectlDescribeStuckNamespace(t *testing.T) {
	srv := startServer(t)
	k := newKubectl(t, srv)
	k.runStdin(t, holdsCRD, "apply", "-f", "-")
	k.run(t, "wait", "--for=condition=Established", "crd/holds.nsconds.example.com", "--timeout=60s")
	k.run(t, "create", "namespace", "nsc-cm")
	k.run(t, "create", "namespace", "nsc-cr")
	k.run(t, "-n", "nsc-cm", "create", "configmap", "held", "--from-literal=a=b")
	k.run(t, "-n", "nsc-cm", "patch", "configmap", "held", "--type=merge", "-p", `{"metadata":{"finalizers":["example.com/hold"]}}`)
	k.runStdin(t, heldHold, "-n", "nsc-cr", "apply", "-f", "-")
	mustContain(t, k.run(t, "delete", "namespace", "nsc-cm", "nsc-cr", "--wait=false"), `namespace "nsc-cr" deleted`)

	for ns, want := range map[string]string{"nsc-cm": describeStuckConfigMap, "nsc-cr": describeStuckHold} {
		r := eventuallyKubectl(t, k, "NamespaceFinalizersRemaining", "describe", "namespace", ns)
		mustEqual(t, "kubectl describe namespace "+ns, describedConditions(r.stdout), want)
		obj := parseYAML(t, k.run(t, "get", "namespace", ns, "-o", "yaml"))
		mustEqual(t, ns+" phase", nestedString(obj, "status", "phase"), "Terminating")
	}

	k.run(t, "-n", "nsc-cm", "patch", "configmap", "held", "--type=merge", "-p", `{"metadata":{"finalizers":null}}`)
	k.run(t, "-n", "nsc-cr", "patch", "hold", "h1", "--type=merge", "-p", `{"metadata":{"finalizers":null}}`)
	k.run(t, "wait", "--for=delete", "namespace/nsc-cm", "namespace/nsc-cr", "--timeout=60s")
	for _, ns := range []string{"nsc-cm", "nsc-cr"} {
		mustContain(t, k.fail(t, "get", "namespace", ns), `Error from server (NotFound): namespaces "`+ns+`" not found`)
	}
}
