// Package admission is crdserver's dynamic admission: the
// MutatingAdmissionPolicy, MutatingAdmissionWebhook,
// ValidatingAdmissionPolicy and ValidatingAdmissionWebhook plugins of
// kube-apiserver v1.37, run by Kubernetes' own code (k8s.io/apiserver's
// admission plugins, chain, reinvocation and metrics) without its generic
// server.
//
// An Admission is an admission.MutationInterface and ValidationInterface,
// assembled as kube-apiserver assembles its admission chain: the four plugins
// in kube's order, each decorated with the per-controller metrics, inside
// Kubernetes' reinvocation handler (mutating plugins run a second time when
// a later one changed the object and an earlier one asked for reinvocation),
// the whole wrapped in the per-step metrics.
//
//	adm, err := admission.New(admission.Options{Client: loopback, ...})
//	err = adm.Start(ctx) // informers; everything stops with ctx
//	attrs := k8sadmission.NewAttributesRecord(obj, old, kind, ns, name, gvr, "", k8sadmission.Create, opts, dryRun, user)
//	oi := admission.NewObjectInterfaces(admission.ResourceFuncs{Convert: ..., Default: ...})
//	err = adm.Admit(ctx, attrs, oi)     // mutating: obj is changed in place
//	...                                 // schema validation
//	err = adm.Validate(ctx, attrs2, oi) // validating, on the final object
//	annotations := admission.AuditAnnotations(attrs, level)
//
// Objects are *unstructured.Unstructured for every resource, built-in ones
// included; ObjectInterfaces gives the plugins what they need to convert them
// between a resource's versions (matchPolicy Equivalent, a webhook's or a
// policy's other version), to default them after a patch, and to find the
// equivalent resources of a request.
//
// Warnings (validationActions Warn, webhook warnings) go to the
// k8s.io/apiserver/pkg/warning recorder of the request's context. Audit
// annotations are collected on the attributes (admission.NewAttributesRecord)
// and read with AuditAnnotations.
//
// Webhook services are reached through Options.ServiceAddresses, as
// conversion webhooks are (crdserver has no cluster DNS); the TLS server name
// stays <name>.<namespace>.svc. The plugins' apiserver_admission_* (and
// policy and webhook client) metrics, kept by Kubernetes in its legacy
// registry, are exported to Options.Registerer.
//
// RunTypeChecker is kube-controller-manager's ValidatingAdmissionPolicy
// status controller: it writes status.typeChecking of every policy, with the
// TypeChecker of k8s.io/apiserver.
package admission
