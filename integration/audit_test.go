package integration

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"

	"github.com/crdserver/crdserver/server"
)

const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
rules:
- level: None
  nonResourceURLs: ["/readyz*", "/healthz*", "/livez*"]
- level: RequestResponse
  resources: [{group: "stable.example.com", resources: ["crontabs"]}]
  omitManagedFields: true
- level: Request
  resources: [{group: "rbac.authorization.k8s.io"}]
  omitStages: ["RequestReceived"]
- level: Metadata
`

func readEvents(t *testing.T, path string) []auditv1.Event {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []auditv1.Event
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 8<<20)
	for sc.Scan() {
		var ev auditv1.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("not an Event: %s", sc.Text())
		}
		out = append(out, ev)
	}
	return out
}

// eventsFor returns the events of requests whose URI starts with prefix,
// with the verb given, leaving out crdserver's own controllers (whose
// requests are audited too, as kube-apiserver audits its loopback client).
func eventsFor(evs []auditv1.Event, verb, prefix string) []auditv1.Event {
	var out []auditv1.Event
	for _, ev := range evs {
		if ev.Verb == verb && strings.HasPrefix(ev.RequestURI, prefix) && ev.User.Username != "system:apiserver" {
			out = append(out, ev)
		}
	}
	return out
}

func TestAuditPolicy(t *testing.T) {
	dir := t.TempDir()
	policy := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "audit.log")
	e := start(t, func(c *server.Config) {
		c.AuditLogPath, c.AuditPolicyFile, c.TokenAuthFile = logPath, policy, writeTokens(t)
	})
	e.createCRD(cronTabCRD(t))
	e.do("GET", "/readyz", "")
	e.mustCreate(ctPath, `{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"audited"},"spec":{"image":"x"}}`)
	e.mustCreate("/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles", `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"Role","metadata":{"name":"r"},"rules":[]}`)
	e.do("GET", "/api/v1/namespaces", "")
	jane := newClient(t, e.srv, tls.Certificate{})
	jane.token = "jane-token"
	jane.do("GET", ctPath, "")
	e.do("GET", "/api/v1/namespaces/default", "", "Impersonate-User", "jane")
	e.do("GET", ctPath+"?watch=true&timeoutSeconds=1", "")
	time.Sleep(50 * time.Millisecond) // the watch's last event is written after its response ends
	evs := readEvents(t, logPath)

	if got := eventsFor(evs, "get", "/readyz"); len(got) != 0 {
		t.Errorf("level None still logged: %+v", got)
	}
	// RequestResponse: both stages, both objects, no managedFields.
	cr := eventsFor(evs, "create", ctPath)
	if len(cr) != 2 || cr[0].Stage != auditv1.StageRequestReceived || cr[1].Stage != auditv1.StageResponseComplete {
		t.Fatalf("crontab create events: %+v", cr)
	}
	done := cr[1]
	if done.Level != auditv1.LevelRequestResponse || done.RequestObject == nil || done.ResponseObject == nil ||
		strings.Contains(string(done.ResponseObject.Raw), "managedFields") || !strings.Contains(string(done.ResponseObject.Raw), `"uid"`) ||
		done.ResponseStatus.Code != 201 || done.ObjectRef.Name != "audited" || done.ObjectRef.Resource != "crontabs" ||
		done.User.Username != "crdserver-admin" || done.Annotations["authorization.k8s.io/decision"] != "allow" || done.AuditID != cr[0].AuditID {
		t.Fatalf("crontab create: %+v", done)
	}
	// Request level: the request only, and RequestReceived omitted.
	rr := eventsFor(evs, "create", "/apis/rbac.authorization.k8s.io")
	if len(rr) != 1 || rr[0].Level != auditv1.LevelRequest || rr[0].RequestObject == nil || rr[0].ResponseObject != nil {
		t.Fatalf("role create: %+v", rr)
	}
	// Metadata: no objects.
	md := eventsFor(evs, "list", "/api/v1/namespaces")
	if len(md) != 2 || md[1].RequestObject != nil || md[1].ResponseObject != nil || md[1].Level != auditv1.LevelMetadata {
		t.Fatalf("namespace list: %+v", md)
	}
	// A forbidden request: the decision and the Status.
	var forbidden *auditv1.Event
	for i, ev := range eventsFor(evs, "list", ctPath) {
		if ev.User.Username == "jane" && ev.Stage == auditv1.StageResponseComplete {
			forbidden = &eventsFor(evs, "list", ctPath)[i]
		}
	}
	if forbidden == nil || forbidden.ResponseStatus.Code != 403 || forbidden.ResponseStatus.Reason != "Forbidden" ||
		forbidden.Annotations["authorization.k8s.io/decision"] != "forbid" {
		t.Fatalf("forbidden request: %+v", forbidden)
	}
	// Impersonation: the real user and whom it impersonated.
	imp := eventsFor(evs, "get", "/api/v1/namespaces/default")
	if len(imp) != 2 || imp[1].User.Username != "crdserver-admin" || imp[1].ImpersonatedUser == nil || imp[1].ImpersonatedUser.Username != "jane" {
		t.Fatalf("impersonated request: %+v", imp)
	}
	// A watch reports ResponseStarted.
	stages := map[auditv1.Stage]bool{}
	for _, ev := range eventsFor(evs, "watch", ctPath) {
		stages[ev.Stage] = true
	}
	if !stages[auditv1.StageResponseStarted] || !stages[auditv1.StageResponseComplete] {
		t.Fatalf("watch stages %v", stages)
	}
}

func TestAuditRotation(t *testing.T) {
	dir := t.TempDir()
	logPath := filepath.Join(dir, "audit.log")
	e := start(t, func(c *server.Config) { c.AuditLogPath, c.AuditLogMaxSizeMB, c.AuditLogMaxBackups = logPath, 1, 2 })
	// Metadata events of about 1 KiB: a few thousand pass a megabyte.
	long := strings.Repeat("x", 600)
	for i := 0; i < 1500; i++ {
		e.do("GET", fmt.Sprintf("/api/v1/namespaces/default?q=%s%d", long, i), "")
	}
	matches, _ := filepath.Glob(filepath.Join(dir, "audit-*.log"))
	if len(matches) == 0 {
		entries, _ := os.ReadDir(dir)
		t.Fatalf("no rotated file: %v", entries)
	}
	st, err := os.Stat(logPath)
	if err != nil || st.Size() > 1<<20 {
		t.Fatalf("current log: %v %v", st, err)
	}
}
