package e2e

import (
	"strings"
	"testing"
	"time"
)

const admissionExamples = "../examples/admission/"

// eventuallyKubectl runs kubectl until its output (stdout and stderr)
// contains want, for at most 30 s: admission policies take effect a few
// seconds after they are written (Kubernetes' plugins refresh their view
// of the OpenAPI every 5 s), on crdserver as on kube-apiserver.
func eventuallyKubectl(t *testing.T, k *kubectl, want string, args ...string) result {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := k.exec("", args...)
		if strings.Contains(r.stdout+r.stderr, want) {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q within 30 s; last:\n%s", want, r)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// TestAdmissionExamplesAsDocumented follows the README's "Admission"
// section with kubectl: a ValidatingAdmissionPolicy with a ConfigMap
// parameter denies, then (validationActions Warn) warns; a
// MutatingAdmissionPolicy labels new CronTabs. The texts are
// kube-apiserver v1.37's for the same commands.
func TestAdmissionExamplesAsDocumented(t *testing.T) {
	srv := startServer(t)
	k := newKubectl(t, srv)
	installCRD(t, k)
	k.run(t, "apply", "-f", admissionExamples+"max-replicas.yaml")
	k.run(t, "apply", "-f", admissionExamples+"managed-by.yaml")

	const denied = `The crontabs "big-cron" is invalid: : ValidatingAdmissionPolicy 'crontab-max-replicas' with binding 'crontab-max-replicas' denied request: replicas must be at most 5`
	// Server-side dry runs until the policies are in force.
	eventuallyKubectl(t, k, denied, "apply", "--dry-run=server", "-f", admissionExamples+"big-crontab.yaml")
	mustContain(t, k.fail(t, "apply", "-f", admissionExamples+"big-crontab.yaml"), denied)
	mustContain(t, k.fail(t, "get", "crontab", "big-cron"), `crontabs.stable.example.com "big-cron" not found`)

	// The mutating policy labels what is created (once it knows the CRD's
	// schema, a few seconds after the CRD is established).
	eventuallyKubectl(t, k, "crdserver", "apply", "--dry-run=server", "-f", "../examples/my-crontab.yaml", "-o", "jsonpath={.metadata.labels}")
	k.run(t, "apply", "-f", "../examples/my-crontab.yaml")
	mustEqual(t, "label", k.run(t, "get", "crontab", "my-new-cron-object", "-o", "jsonpath={.metadata.labels.example\\.com/managed-by}"), "crdserver")
	mustContain(t, k.fail(t, "patch", "crontab", "my-new-cron-object", "--type=merge", "-p", `{"spec":{"replicas":7}}`),
		`The crontabs "my-new-cron-object" is invalid: : ValidatingAdmissionPolicy 'crontab-max-replicas' with binding 'crontab-max-replicas' denied request: replicas must be at most 5`)

	// Warn instead of Deny: the write goes through, kubectl prints the
	// warning.
	k.run(t, "patch", "validatingadmissionpolicybinding", "crontab-max-replicas", "--type=merge", "-p", `{"spec":{"validationActions":["Warn"]}}`)
	const warning = "Warning: Validation failed for ValidatingAdmissionPolicy 'crontab-max-replicas' with binding 'crontab-max-replicas': replicas must be at most 5"
	eventuallyKubectl(t, k, warning, "apply", "--dry-run=server", "-f", admissionExamples+"big-crontab.yaml")
	r := k.exec("", "apply", "-f", admissionExamples+"big-crontab.yaml")
	if r.err != nil || !strings.Contains(r.stderr, warning) || !strings.Contains(r.stdout, "crontab.stable.example.com/big-cron created") {
		t.Fatalf("a warned apply:\n%s", r)
	}
	mustEqual(t, "replicas", k.run(t, "get", "crontab", "big-cron", "-o", "jsonpath={.spec.replicas}"), "10")
	mustEqual(t, "type checking", k.run(t, "get", "validatingadmissionpolicy", "crontab-max-replicas", "-o", "jsonpath={.status.observedGeneration}"), "1")
}
