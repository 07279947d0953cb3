// Package e2e holds crdserver's black-box end-to-end tests. They build the
// crdserver binary from the parent module, a real kubectl (./kubectl, the
// k8s.io/kubectl module's own command), etcd (for the replica tests) and
// Helm v3 (a tool of this module), start crdserver on a random loopback
// port with a temporary data folder, and drive it the way users do: with
// kubectl, with client-go's dynamic client, and with the generated
// apiextensions clientset.
//
// Run them from this folder:
//
//	go test ./...
//
// The first run compiles kubectl, which takes a few minutes on a small
// machine; later runs reuse Go's build cache. Test results are cached by
// `go test` like any others, keyed on crdserver's source files, so a change
// there reruns the suite; -count=1 forces a run.
//
// The files: harness_test.go builds the binaries and starts, stops and
// restarts servers and kubectl; kubectl_test.go, client_test.go and
// restart_test.go are the scenarios; versions_test.go plays the whole life
// cycle of an API version (webhook conversion through the example webhook
// that webhook_test.go builds and runs, storage switch, deprecation,
// migration, unserving, removal); schema_test.go checks schemas through
// kubectl (defaults, pruning, field validation modes, OpenAPI and CEL
// errors with Kubernetes' texts, transition rules, explain);
// subresources_test.go the status and scale subresources, printer columns,
// categories, field selectors, server-side apply, finalizers and dry run;
// kubectl_test.go also deletes with every --cascade; controllerruntime_test.go
// runs controller-runtime's client and a manager; rbac_test.go plays
// authentication, RBAC, auth can-i, --as and escalation with kubectl;
// crash_test.go kills the server under load and checks that no acknowledged
// write is lost; fault_test.go sends malformed and slow requests;
// operator_test.go runs a controller-runtime operator with leader election,
// event recorders and owned ConfigMaps and Secrets, in two instances;
// helm_test.go installs, upgrades, rolls back and uninstalls a chart with
// Helm; etcd_test.go and replicas_test.go run several replicas on a
// 3-member etcd of processes and put faults to them.
// The server serves HTTPS with the certificates it makes in its data folder;
// the admin kubeconfig it writes holds them. testdata/ holds the fixtures
// of e2e alone; the CronTab CRD and CronTab are the README's (examples/),
// the lossy Widgets of check-conversion internal/fixtures'.
package e2e
