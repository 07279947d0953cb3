package integration

import (
	"encoding/json"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	appsv1apply "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1apply "k8s.io/client-go/applyconfigurations/core/v1"
	metav1apply "k8s.io/client-go/applyconfigurations/meta/v1"
)

// minimalDeployment is the least a Deployment needs: a selector and a
// template with matching labels and one container.
func minimalDeployment(name string) *appsv1.Deployment {
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}},
			},
		},
	}
}

// refMinimalSpec is the spec kube-apiserver v1.37.2 answered for
// minimalDeployment's create (a dry run, before any controller).
const refMinimalSpec = `{"replicas":1,"selector":{"matchLabels":{"app":"web"}},"template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"name":"c","image":"nginx","resources":{},"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File","imagePullPolicy":"Always"}],"restartPolicy":"Always","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst","securityContext":{},"schedulerName":"default-scheduler"}},"strategy":{"type":"RollingUpdate","rollingUpdate":{"maxUnavailable":"25%","maxSurge":"25%"}},"revisionHistoryLimit":10,"progressDeadlineSeconds":600}`

func TestDeploymentDefaults(t *testing.T) {
	e := start(t)
	d := minimalDeployment("web")
	d.Status.Replicas = 5 // reset on create
	got, err := e.kube.AppsV1().Deployments("default").Create(e.ctx, d, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Generation != 1 {
		t.Errorf("generation %d, want 1", got.Generation)
	}
	if !reflect.DeepEqual(got.Status, appsv1.DeploymentStatus{}) {
		t.Errorf("status %+v, want none", got.Status)
	}
	var want appsv1.DeploymentSpec
	if err := json.Unmarshal([]byte(refMinimalSpec), &want); err != nil {
		t.Fatal(err)
	}
	stored, err := e.kube.AppsV1().Deployments("default").Get(e.ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []appsv1.DeploymentSpec{got.Spec, stored.Spec} {
		if g, w := mustJSON(s), mustJSON(want); g != w {
			t.Errorf("spec\n%s\nwant (kube-apiserver's)\n%s", g, w)
		}
	}
}

func TestDeploymentValidation(t *testing.T) {
	e := start(t)
	// Kube-apiserver v1.37.2's answers to these creates.
	cases := []struct {
		name   string
		edit   func(d *appsv1.Deployment)
		causes []metav1.StatusCause
		msg    string
	}{{
		name: "no selector",
		edit: func(d *appsv1.Deployment) { d.Spec.Selector = nil },
		causes: []metav1.StatusCause{
			{Type: metav1.CauseTypeFieldValueRequired, Message: "Required value", Field: "spec.selector"},
			{Type: metav1.CauseTypeFieldValueInvalid, Message: "Invalid value: {\"app\":\"web\"}: `selector` does not match template `labels`", Field: "spec.template.metadata.labels"},
		},
		msg: "Deployment.apps \"web\" is invalid: [spec.selector: Required value, spec.template.metadata.labels: Invalid value: {\"app\":\"web\"}: `selector` does not match template `labels`]",
	}, {
		name: "selector not matching",
		edit: func(d *appsv1.Deployment) { d.Spec.Template.Labels = map[string]string{"app": "other"} },
		causes: []metav1.StatusCause{
			{Type: metav1.CauseTypeFieldValueInvalid, Message: "Invalid value: {\"app\":\"other\"}: `selector` does not match template `labels`", Field: "spec.template.metadata.labels"},
		},
		msg: "Deployment.apps \"web\" is invalid: spec.template.metadata.labels: Invalid value: {\"app\":\"other\"}: `selector` does not match template `labels`",
	}, {
		name: "bad container name",
		edit: func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Name = "Bad_Name" },
		causes: []metav1.StatusCause{
			{Type: metav1.CauseTypeFieldValueInvalid, Message: "Invalid value: \"Bad_Name\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')", Field: "spec.template.spec.containers[0].name"},
		},
		msg: "Deployment.apps \"web\" is invalid: spec.template.spec.containers[0].name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
	}, {
		name: "negative replicas",
		edit: func(d *appsv1.Deployment) { d.Spec.Replicas = ptr[int32](-1) },
		causes: []metav1.StatusCause{
			{Type: metav1.CauseTypeFieldValueInvalid, Message: "Invalid value: -1: must be greater than or equal to 0", Field: "spec.replicas"},
		},
		msg: "Deployment.apps \"web\" is invalid: spec.replicas: Invalid value: -1: must be greater than or equal to 0",
	}, {
		name: "bad image pull policy",
		edit: func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].ImagePullPolicy = "Sometimes" },
		causes: []metav1.StatusCause{
			{Type: metav1.CauseTypeFieldValueNotSupported, Message: "Unsupported value: \"Sometimes\": supported values: \"Always\", \"IfNotPresent\", \"Never\"", Field: "spec.template.spec.containers[0].imagePullPolicy"},
		},
		msg: "Deployment.apps \"web\" is invalid: spec.template.spec.containers[0].imagePullPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"IfNotPresent\", \"Never\"",
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := minimalDeployment("web")
			c.edit(d)
			r := e.do(http.MethodPost, "/apis/apps/v1/namespaces/default/deployments", mustJSON(d))
			st := expectStatus(t, r, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid, "")
			if st.Message != c.msg {
				t.Errorf("message\n%s\nwant\n%s", st.Message, c.msg)
			}
			want := &metav1.StatusDetails{Name: "web", Group: "apps", Kind: "Deployment", Causes: c.causes}
			if !reflect.DeepEqual(st.Details, want) {
				t.Errorf("details\n%s\nwant\n%s", mustJSON(st.Details), mustJSON(want))
			}
		})
	}
	if _, err := e.kube.AppsV1().Deployments("default").Get(e.ctx, "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("an invalid Deployment was stored: %v", err)
	}
}

func TestDeploymentGenerationAndStatus(t *testing.T) {
	e := start(t)
	c := e.kube.AppsV1().Deployments("default")
	d, err := c.Create(e.ctx, minimalDeployment("web"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// A label change keeps the generation; a spec or annotation change
	// bumps it; a status written with the object is dropped.
	d.Labels = map[string]string{"l": "1"}
	d.Status.Replicas = 7
	if d, err = c.Update(e.ctx, d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if d.Generation != 1 || d.Status.Replicas != 0 {
		t.Fatalf("after a label change: generation %d status.replicas %d, want 1 and 0", d.Generation, d.Status.Replicas)
	}
	d.Spec.Replicas = ptr[int32](3)
	if d, err = c.Update(e.ctx, d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if d.Generation != 2 {
		t.Fatalf("after a spec change: generation %d, want 2", d.Generation)
	}
	d.Annotations = map[string]string{"a": "1"}
	if d, err = c.Update(e.ctx, d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if d.Generation != 3 {
		t.Fatalf("after an annotation change: generation %d, want 3", d.Generation)
	}

	// The status subresource writes the status only.
	d.Status = appsv1.DeploymentStatus{Replicas: 3, ReadyReplicas: 2, ObservedGeneration: 3}
	d.Spec.Replicas = ptr[int32](9)
	if d, err = c.UpdateStatus(e.ctx, d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if *d.Spec.Replicas != 3 || d.Status.Replicas != 3 || d.Status.ReadyReplicas != 2 || d.Generation != 3 {
		t.Fatalf("after a status write: spec.replicas %d status %+v generation %d", *d.Spec.Replicas, d.Status, d.Generation)
	}
	// Kube's status validation.
	d.Status.ReadyReplicas = -1
	if _, err = c.UpdateStatus(e.ctx, d, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) || !containsCause(err, "status.readyReplicas") {
		t.Fatalf("negative status.readyReplicas: %v, want Invalid on status.readyReplicas", err)
	}

	// The selector is immutable.
	d, err = c.Get(e.ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d.Spec.Selector.MatchLabels["x"] = "y"
	d.Spec.Template.Labels["x"] = "y"
	if _, err := c.Update(e.ctx, d, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) || !containsCause(err, "spec.selector") {
		t.Fatalf("selector change: %v, want Invalid on spec.selector", err)
	}
}

func containsCause(err error, field string) bool {
	s, ok := err.(apierrors.APIStatus)
	if !ok || s.Status().Details == nil {
		return false
	}
	return slices.ContainsFunc(s.Status().Details.Causes, func(c metav1.StatusCause) bool { return c.Field == field })
}

func TestDeploymentScale(t *testing.T) {
	e := start(t)
	c := e.kube.AppsV1().Deployments("default")
	d, err := c.Create(e.ctx, minimalDeployment("web"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.GetScale(e.ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Spec.Replicas != 1 || s.Status.Replicas != 0 || s.Status.Selector != "app=web" || s.Name != "web" || s.UID != d.UID {
		t.Fatalf("scale %+v", s)
	}
	s.Spec.Replicas = 4
	if s, err = c.UpdateScale(e.ctx, "web", s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if s.Spec.Replicas != 4 {
		t.Fatalf("scale after update: %+v", s)
	}
	if d, err = c.Get(e.ctx, "web", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if *d.Spec.Replicas != 4 || d.Generation != 2 {
		t.Fatalf("after scaling: spec.replicas %d generation %d, want 4 and 2", *d.Spec.Replicas, d.Generation)
	}
	r := e.do(http.MethodPatch, "/apis/apps/v1/namespaces/default/deployments/web/scale", `{"spec":{"replicas":2}}`, "Content-Type", "application/merge-patch+json")
	if r.code != http.StatusOK {
		t.Fatalf("scale patch: %d %s", r.code, r.body)
	}
	var patched autoscalingv1.Scale
	if err := json.Unmarshal(r.body, &patched); err != nil || patched.Kind != "Scale" || patched.APIVersion != "autoscaling/v1" || patched.Spec.Replicas != 2 {
		t.Fatalf("scale after a patch (%v): %s", err, r.body)
	}
	if d, err = c.Get(e.ctx, "web", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if *d.Spec.Replicas != 2 || d.Generation != 3 {
		t.Fatalf("after a scale patch: spec.replicas %d generation %d, want 2 and 3", *d.Spec.Replicas, d.Generation)
	}
}

func TestDeploymentPatches(t *testing.T) {
	e := start(t)
	c := e.kube.AppsV1().Deployments("default")
	d := minimalDeployment("web")
	d.Spec.Template.Spec.Containers = append(d.Spec.Template.Spec.Containers, corev1.Container{Name: "side", Image: "busybox"})
	if _, err := c.Create(e.ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Strategic merge: containers merge by name.
	got, err := c.Patch(e.ctx, "web", types.StrategicMergePatchType,
		[]byte(`{"spec":{"template":{"spec":{"containers":[{"name":"c","image":"nginx:2"}]}}}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cs := got.Spec.Template.Spec.Containers
	if len(cs) != 2 || cs[0].Name != "c" || cs[0].Image != "nginx:2" || cs[1].Name != "side" || cs[1].Image != "busybox" {
		t.Fatalf("containers after a strategic merge patch: %+v", cs)
	}
	if got.Generation != 2 {
		t.Fatalf("generation %d, want 2", got.Generation)
	}

	// Server-side apply: a second manager's container joins the list,
	// the first's stay.
	ac := appsv1apply.Deployment("web", "default").WithSpec(appsv1apply.DeploymentSpec().
		WithSelector(metav1apply.LabelSelector().WithMatchLabels(map[string]string{"app": "web"})).
		WithTemplate(corev1apply.PodTemplateSpec().WithLabels(map[string]string{"app": "web"}).
			WithSpec(corev1apply.PodSpec().WithContainers(corev1apply.Container().WithName("extra").WithImage("redis")))))
	got, err = c.Apply(e.ctx, ac, metav1.ApplyOptions{FieldManager: "applier"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range got.Spec.Template.Spec.Containers {
		names = append(names, c.Name)
	}
	if !slices.Equal(names, []string{"c", "side", "extra"}) {
		t.Fatalf("containers after apply: %v", names)
	}
	extra := got.Spec.Template.Spec.Containers[2]
	if extra.ImagePullPolicy != corev1.PullAlways || extra.TerminationMessagePath != "/dev/termination-log" {
		t.Fatalf("applied container not defaulted: %+v", extra)
	}
	if !slices.ContainsFunc(got.ManagedFields, func(m metav1.ManagedFieldsEntry) bool {
		return m.Manager == "applier" && m.Operation == metav1.ManagedFieldsOperationApply
	}) {
		t.Fatalf("no apply entry in managedFields: %+v", got.ManagedFields)
	}
	// Apply of the status on the main resource owns nothing there.
	st := appsv1apply.Deployment("web", "default").WithStatus(appsv1apply.DeploymentStatus().WithReplicas(5))
	got, err = c.Apply(e.ctx, st, metav1.ApplyOptions{FieldManager: "status-applier", Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.Replicas != 0 {
		t.Fatalf("status applied through the main resource: %+v", got.Status)
	}
	got, err = c.ApplyStatus(e.ctx, st, metav1.ApplyOptions{FieldManager: "status-applier", Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.Replicas != 5 {
		t.Fatalf("status after ApplyStatus: %+v", got.Status)
	}
}

func TestDeploymentTableAndDiscovery(t *testing.T) {
	e := start(t)
	d := minimalDeployment("web")
	if _, err := e.kube.AppsV1().Deployments("default").Create(e.ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	r := e.do(http.MethodGet, "/apis/apps/v1/namespaces/default/deployments", "", "Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	if r.code != http.StatusOK {
		t.Fatalf("table: %d %s", r.code, r.body)
	}
	var tbl metav1.Table
	if err := json.Unmarshal(r.body, &tbl); err != nil {
		t.Fatal(err)
	}
	// kube-apiserver v1.37.2's columns.
	type col struct {
		name     string
		priority int32
	}
	var cols []col
	for _, c := range tbl.ColumnDefinitions {
		cols = append(cols, col{c.Name, c.Priority})
	}
	want := []col{{"Name", 0}, {"Ready", 0}, {"Up-to-date", 0}, {"Available", 0}, {"Age", 0}, {"Containers", 1}, {"Images", 1}, {"Selector", 1}}
	if !slices.Equal(cols, want) {
		t.Fatalf("columns %v, want %v", cols, want)
	}
	if tbl.ColumnDefinitions[1].Description != "Number of the pod with ready state" {
		t.Errorf("Ready's description %q", tbl.ColumnDefinitions[1].Description)
	}
	if len(tbl.Rows) != 1 {
		t.Fatalf("rows %+v", tbl.Rows)
	}
	cells := tbl.Rows[0].Cells
	if len(cells) != 8 || cells[0] != "web" || cells[1] != "0/1" || cells[2] != float64(0) || cells[3] != float64(0) ||
		cells[5] != "c" || cells[6] != "nginx" || cells[7] != "app=web" {
		t.Fatalf("cells %v", cells)
	}
	var meta metav1.PartialObjectMetadata
	if err := json.Unmarshal(tbl.Rows[0].Object.Raw, &meta); err != nil || meta.Name != "web" {
		t.Fatalf("row object %s: %v", tbl.Rows[0].Object.Raw, err)
	}

	// Protobuf, as client-go's typed clients ask for it.
	pb := e.do(http.MethodGet, "/apis/apps/v1/namespaces/default/deployments/web", "", "Accept", "application/vnd.kubernetes.protobuf")
	if pb.code != http.StatusOK || pb.header.Get("Content-Type") != "application/vnd.kubernetes.protobuf" || !strings.HasPrefix(string(pb.body), "k8s\x00") {
		t.Fatalf("protobuf: %d %v %q", pb.code, pb.header, pb.body)
	}

	list, err := e.kube.Discovery().ServerResourcesForGroupVersion("apps/v1")
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]metav1.APIResource{}
	for _, r := range list.APIResources {
		found[r.Name] = r
	}
	dep := found["deployments"]
	if !slices.Equal(dep.ShortNames, []string{"deploy"}) || !slices.Equal(dep.Categories, []string{"all"}) || !dep.Namespaced || dep.Kind != "Deployment" {
		t.Errorf("deployments in discovery: %+v", dep)
	}
	if s := found["deployments/scale"]; s.Group != "autoscaling" || s.Version != "v1" || s.Kind != "Scale" {
		t.Errorf("deployments/scale in discovery: %+v", s)
	}
	if s := found["deployments/status"]; s.Kind != "Deployment" {
		t.Errorf("deployments/status in discovery: %+v", s)
	}
}

// TestDeploymentRBAC: the default edit role writes Deployments and their
// scale, view reads them, as in Kubernetes.
func TestDeploymentRBAC(t *testing.T) {
	e := start(t)
	edit, view := e.editAndView()
	editor, viewer := edit.AppsV1().Deployments("default"), view.AppsV1().Deployments("default")
	// The aggregated roles follow their parts' rules a moment later.
	var err error
	for i := 0; i < 100; i++ {
		if _, err = editor.Create(e.ctx, minimalDeployment("web"), metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("create as edit: %v", err)
	}
	s, err := editor.GetScale(e.ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Spec.Replicas = 2
	if _, err := editor.UpdateScale(e.ctx, "web", s, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("scale as edit: %v", err)
	}
	if _, err := viewer.Get(e.ctx, "web", metav1.GetOptions{}); err != nil {
		t.Fatalf("get as view: %v", err)
	}
	if _, err := viewer.GetScale(e.ctx, "web", metav1.GetOptions{}); err != nil {
		t.Fatalf("get scale as view: %v", err)
	}
	if _, err := viewer.Create(e.ctx, minimalDeployment("other"), metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("create as view: %v, want Forbidden", err)
	}
}

// workloadBody is minimalDeployment's body as another apps kind.
func workloadBody(t *testing.T, kind, name string, edit func(m map[string]any)) string {
	t.Helper()
	d := minimalDeployment(name)
	var m map[string]any
	if err := json.Unmarshal([]byte(mustJSON(d)), &m); err != nil {
		t.Fatal(err)
	}
	m["kind"] = kind
	delete(m, "status")
	if edit != nil {
		edit(m)
	}
	return mustJSON(m)
}

// TestWorkloadDefaults creates the other apps kinds with the least spec
// and compares what is stored with kube-apiserver v1.37.2's answers.
func TestWorkloadDefaults(t *testing.T) {
	e := start(t)
	cases := []struct{ kind, resource, want string }{
		{"ReplicaSet", "replicasets", `{"spec":{"replicas":1,"selector":{"matchLabels":{"app":"web"}},"template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"name":"c","image":"nginx","resources":{},"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File","imagePullPolicy":"Always"}],"restartPolicy":"Always","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst","securityContext":{},"schedulerName":"default-scheduler"}}},"status":{"replicas":0}}`},
		{"StatefulSet", "statefulsets", `{"spec":{"replicas":1,"selector":{"matchLabels":{"app":"web"}},"template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"name":"c","image":"nginx","resources":{},"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File","imagePullPolicy":"Always"}],"restartPolicy":"Always","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst","securityContext":{},"schedulerName":"default-scheduler"}},"serviceName":"","podManagementPolicy":"OrderedReady","updateStrategy":{"type":"RollingUpdate","rollingUpdate":{"partition":0,"maxUnavailable":1}},"revisionHistoryLimit":10,"persistentVolumeClaimRetentionPolicy":{"whenDeleted":"Retain","whenScaled":"Retain"}},"status":{"replicas":0,"availableReplicas":0}}`},
		{"DaemonSet", "daemonsets", `{"spec":{"selector":{"matchLabels":{"app":"web"}},"template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"name":"c","image":"nginx","resources":{},"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File","imagePullPolicy":"Always"}],"restartPolicy":"Always","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst","securityContext":{},"schedulerName":"default-scheduler"}},"updateStrategy":{"type":"RollingUpdate","rollingUpdate":{"maxUnavailable":1,"maxSurge":0}},"revisionHistoryLimit":10},"status":{"currentNumberScheduled":0,"numberMisscheduled":0,"desiredNumberScheduled":0,"numberReady":0}}`},
	}
	for _, c := range cases {
		t.Run(c.kind, func(t *testing.T) {
			path := "/apis/apps/v1/namespaces/default/" + c.resource
			r := e.do(http.MethodPost, path, workloadBody(t, c.kind, "web", nil))
			if r.code != http.StatusCreated {
				t.Fatalf("create: %d %s", r.code, r.body)
			}
			for _, got := range []map[string]any{r.object(t), e.do(http.MethodGet, path+"/web", "").object(t)} {
				if meta := got["metadata"].(map[string]any); meta["generation"] != float64(1) && meta["generation"] != int64(1) {
					t.Errorf("generation %v, want 1", meta["generation"])
				}
				g := jsonRoundTrip(t, map[string]any{"spec": got["spec"], "status": got["status"]})
				var w any
				if err := json.Unmarshal([]byte(c.want), &w); err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(g, w) {
					t.Errorf("stored\n%s\nwant (kube-apiserver's)\n%s", mustJSON(g), c.want)
				}
			}
		})
	}
}

func jsonRoundTrip(t *testing.T, v any) any {
	t.Helper()
	var out any
	if err := json.Unmarshal([]byte(mustJSON(v)), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestWorkloadValidation compares kube-apiserver v1.37.2's answers to
// invalid ReplicaSets, StatefulSets and DaemonSets.
func TestWorkloadValidation(t *testing.T) {
	e := start(t)
	cases := []struct {
		kind, resource, name string
		edit                 func(m map[string]any)
		msg                  string
		cause                metav1.StatusCause
	}{{
		kind: "StatefulSet", resource: "statefulsets", name: "web.x",
		msg:   `StatefulSet.apps "web.x" is invalid: metadata.name: Invalid value: "web.x": must not contain dots`,
		cause: metav1.StatusCause{Type: metav1.CauseTypeFieldValueInvalid, Message: `Invalid value: "web.x": must not contain dots`, Field: "metadata.name"},
	}, {
		kind: "DaemonSet", resource: "daemonsets", name: "web",
		edit: func(m map[string]any) {
			m["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["restartPolicy"] = "Never"
		},
		msg:   `DaemonSet.apps "web" is invalid: spec.template.spec.restartPolicy: Unsupported value: "Never": supported values: "Always"`,
		cause: metav1.StatusCause{Type: metav1.CauseTypeFieldValueNotSupported, Message: `Unsupported value: "Never": supported values: "Always"`, Field: "spec.template.spec.restartPolicy"},
	}, {
		kind: "ReplicaSet", resource: "replicasets", name: "web",
		edit:  func(m map[string]any) { m["spec"].(map[string]any)["replicas"] = -2 },
		msg:   `ReplicaSet.apps "web" is invalid: spec.replicas: Invalid value: -2: must be greater than or equal to 0`,
		cause: metav1.StatusCause{Type: metav1.CauseTypeFieldValueInvalid, Message: "Invalid value: -2: must be greater than or equal to 0", Field: "spec.replicas"},
	}}
	for _, c := range cases {
		t.Run(c.kind, func(t *testing.T) {
			r := e.do(http.MethodPost, "/apis/apps/v1/namespaces/default/"+c.resource, workloadBody(t, c.kind, c.name, c.edit))
			st := expectStatus(t, r, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid, "")
			want := &metav1.StatusDetails{Name: c.name, Group: "apps", Kind: c.kind, Causes: []metav1.StatusCause{c.cause}}
			if st.Message != c.msg || !reflect.DeepEqual(st.Details, want) {
				t.Errorf("got %s\nwant message %s details %s", r.body, c.msg, mustJSON(want))
			}
		})
	}
}

// TestWorkloadSubresources: ReplicaSets and StatefulSets scale, a
// DaemonSet has no scale; each writes its status through status only.
func TestWorkloadSubresources(t *testing.T) {
	e := start(t)
	for _, res := range []string{"replicasets", "statefulsets", "daemonsets"} {
		kind := map[string]string{"replicasets": "ReplicaSet", "statefulsets": "StatefulSet", "daemonsets": "DaemonSet"}[res]
		path := "/apis/apps/v1/namespaces/default/" + res + "/web"
		if r := e.do(http.MethodPost, "/apis/apps/v1/namespaces/default/"+res, workloadBody(t, kind, "web", nil)); r.code != http.StatusCreated {
			t.Fatalf("create %s: %d %s", res, r.code, r.body)
		}
		r := e.do(http.MethodGet, path+"/scale", "")
		if res == "daemonsets" {
			if r.code != http.StatusNotFound {
				t.Errorf("daemonsets/scale: %d %s", r.code, r.body)
			}
		} else {
			var s autoscalingv1.Scale
			if r.code != http.StatusOK || json.Unmarshal(r.body, &s) != nil || s.Spec.Replicas != 1 || s.Status.Selector != "app=web" {
				t.Fatalf("%s/scale: %d %s", res, r.code, r.body)
			}
			r = e.do(http.MethodPatch, path+"/scale", `{"spec":{"replicas":3}}`, "Content-Type", "application/merge-patch+json")
			if r.code != http.StatusOK {
				t.Fatalf("%s/scale patch: %d %s", res, r.code, r.body)
			}
			obj := e.do(http.MethodGet, path, "").object(t)
			if spec := obj["spec"].(map[string]any); spec["replicas"] != float64(3) && spec["replicas"] != int64(3) {
				t.Fatalf("%s after scaling: spec %v", res, spec)
			}
		}
		// Status through the main resource is dropped, through status kept.
		r = e.do(http.MethodPatch, path, `{"status":{"observedGeneration":7}}`, "Content-Type", "application/merge-patch+json")
		if st := r.object(t)["status"].(map[string]any); r.code != http.StatusOK || st["observedGeneration"] != nil {
			t.Fatalf("%s status through the main resource: %d %s", res, r.code, r.body)
		}
		r = e.do(http.MethodPatch, path+"/status", `{"status":{"observedGeneration":7}}`, "Content-Type", "application/merge-patch+json")
		if st := r.object(t)["status"].(map[string]any); r.code != http.StatusOK || (st["observedGeneration"] != float64(7) && st["observedGeneration"] != int64(7)) {
			t.Fatalf("%s status: %d %s", res, r.code, r.body)
		}
	}
}

// TestDeploymentWarnings: kube's strategy's warnings reach the client.
func TestDeploymentWarnings(t *testing.T) {
	e := start(t)
	r := e.do(http.MethodPost, "/apis/apps/v1/namespaces/default/deployments", mustJSON(minimalDeployment("web.x")))
	if r.code != http.StatusCreated {
		t.Fatalf("create: %d %s", r.code, r.body)
	}
	// kube-apiserver v1.37.2's header.
	want := `299 - "metadata.name: this is used in Pod names and hostnames, which can result in surprising behavior; a DNS label is recommended: [must not contain dots]"`
	if got := r.header.Values("Warning"); !slices.Equal(got, []string{want}) {
		t.Fatalf("warnings %q, want %q", got, want)
	}
}
