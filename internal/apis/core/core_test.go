package core

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/crdserver/crdserver/internal/resource"
)

func object(t *testing.T, typed any, apiVersion, kind string) *resource.Object {
	t.Helper()
	obj := &resource.Object{Content: map[string]any{"apiVersion": apiVersion, "kind": kind}}
	if err := resource.FromTyped(typed, obj); err != nil {
		t.Fatal(err)
	}
	return obj
}

// errorStrings are field errors as Kubernetes words them in a Status.
func errorStrings(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

func TestConfigMapValidation(t *testing.T) {
	s := configMapStrategy{}
	ctx := context.Background()
	bad := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Data: map[string]string{"a/b": "x", "ok": "y"}, BinaryData: map[string][]byte{"ok": []byte("z")}}
	got := errorStrings(s.Validate(ctx, object(t, bad, "v1", "ConfigMap")))
	want := []string{
		`data[a/b]: Invalid value: "a/b": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')`,
		`data[ok]: Invalid value: "ok": duplicate of key present in binaryData`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q", got)
	}
	big := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Data: map[string]string{"a": strings.Repeat("x", maxDataSize+1)}}
	if got := errorStrings(s.Validate(ctx, object(t, big, "v1", "ConfigMap"))); len(got) != 1 || got[0] != "[]: Too long: may not be more than 1048576 bytes" {
		t.Fatalf("too big: %q", got)
	}
	yes := true
	old := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Data: map[string]string{"a": "1"}, Immutable: &yes}
	changed := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Data: map[string]string{"a": "2"}, BinaryData: map[string][]byte{"b": {1}}}
	got = errorStrings(s.ValidateUpdate(ctx, object(t, changed, "v1", "ConfigMap"), object(t, old, "v1", "ConfigMap")))
	want = []string{
		"immutable: Forbidden: field is immutable when `immutable` is set",
		"data: Forbidden: field is immutable when `immutable` is set",
		"binaryData: Forbidden: field is immutable when `immutable` is set",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("immutable: %q", got)
	}
}

func TestSecretRules(t *testing.T) {
	s := secretStrategy{}
	ctx := context.Background()
	// stringData is merged into data, never kept; type defaults to Opaque.
	obj := object(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}, Data: map[string][]byte{"a": []byte("old"), "b": []byte("b")}, StringData: map[string]string{"a": "new"}}, "v1", "Secret")
	if _, err := s.Normalize(obj); err != nil {
		t.Fatal(err)
	}
	sec, _ := resource.Typed[corev1.Secret](obj)
	if string(sec.Data["a"]) != "new" || string(sec.Data["b"]) != "b" || sec.StringData != nil || sec.Type != corev1.SecretTypeOpaque {
		t.Fatalf("normalized %+v", sec)
	}
	for _, c := range []struct {
		secret *corev1.Secret
		want   []string
	}{
		{&corev1.Secret{Type: corev1.SecretTypeTLS}, []string{"data[tls.crt]: Required value", "data[tls.key]: Required value"}},
		{&corev1.Secret{Type: corev1.SecretTypeDockerConfigJson, Data: map[string][]byte{".dockerconfigjson": []byte("{nope")}},
			[]string{`data[.dockerconfigjson]: Invalid value: "<secret contents redacted>": invalid character 'n' looking for beginning of object key string`}},
		{&corev1.Secret{Type: corev1.SecretTypeDockercfg}, []string{"data[.dockercfg]: Required value"}},
		{&corev1.Secret{Type: corev1.SecretTypeBasicAuth}, []string{"data[username]: Required value", "data[password]: Required value"}},
		{&corev1.Secret{Type: corev1.SecretTypeBasicAuth, Data: map[string][]byte{"password": nil}}, nil},
		{&corev1.Secret{Type: corev1.SecretTypeSSHAuth}, []string{"data[ssh-privatekey]: Required value"}},
		{&corev1.Secret{Type: corev1.SecretTypeServiceAccountToken}, []string{"metadata.annotations[kubernetes.io/service-account.name]: Required value"}},
		{&corev1.Secret{Type: "example.com/custom", Data: map[string][]byte{"bad key": nil}},
			[]string{`data[bad key]: Invalid value: "bad key": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')`}},
	} {
		c.secret.Name = "s"
		if got := errorStrings(s.Validate(ctx, object(t, c.secret, "v1", "Secret"))); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: got %q, want %q", c.secret.Type, got, c.want)
		}
	}
	old := object(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}, Type: corev1.SecretTypeOpaque}, "v1", "Secret")
	next := object(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}, Type: corev1.SecretTypeBasicAuth, Data: map[string][]byte{"username": nil}}, "v1", "Secret")
	if got := errorStrings(s.ValidateUpdate(ctx, next, old)); len(got) != 1 || got[0] != `type: Invalid value: "kubernetes.io/basic-auth": field is immutable` {
		t.Fatalf("type change: %q", got)
	}
}

func TestEventValidation(t *testing.T) {
	ctx := context.Background()
	core := EventStrategy{Version: corev1.SchemeGroupVersion}
	strict := EventStrategy{Version: eventsv1.SchemeGroupVersion}
	legacy := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e", Namespace: "default"}, InvolvedObject: corev1.ObjectReference{Namespace: "other"}}
	if got := errorStrings(core.Validate(ctx, object(t, legacy, "v1", "Event"))); !reflect.DeepEqual(got, []string{`involvedObject.namespace: Invalid value: "other": does not match event.namespace`}) {
		t.Fatalf("legacy: %q", got)
	}
	// New events need the reporting fields; the core API names
	// reportingController by its core name.
	fresh := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e", Namespace: "ns"}, EventTime: metav1.NewMicroTime(time.Now())}
	got := errorStrings(core.Validate(ctx, object(t, fresh, "v1", "Event")))
	want := []string{`involvedObject.namespace: Invalid value: "": does not match event.namespace`, "reportingComponent: Required value",
		`reportingComponent: Invalid value: "": name part must be non-empty`,
		`reportingComponent: Invalid value: "": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`,
		"reportingInstance: Required value", "action: Required value", "reason: Required value"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("new core event: %q", got)
	}
	bad := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e", Namespace: "default"}, Type: "Bogus", Count: 2, Source: corev1.EventSource{Component: "x"}}
	got = errorStrings(strict.Validate(ctx, object(t, bad, "v1", "Event")))
	want = []string{"eventTime: Required value", `type: Invalid value: "": has invalid value: Bogus`, `count: Invalid value: "": needs to be unset`, `source: Invalid value: "": needs to be unset`}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("strict: %q", got)
	}
}

// An Event read through the other API and back is the same Event.
func TestEventConversionRoundTrip(t *testing.T) {
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	micro := metav1.NewMicroTime(time.Now().Truncate(time.Microsecond))
	ev := &corev1.Event{
		TypeMeta:       metav1.TypeMeta{APIVersion: "v1", Kind: "Event"},
		ObjectMeta:     metav1.ObjectMeta{Name: "e", Namespace: "ns", ResourceVersion: "7", Labels: map[string]string{"a": "b"}},
		InvolvedObject: corev1.ObjectReference{Kind: "ConfigMap", Name: "c", Namespace: "ns", UID: "u", FieldPath: "data"},
		Reason:         "R", Message: "m", Source: corev1.EventSource{Component: "c", Host: "h"},
		FirstTimestamp: now, LastTimestamp: now, Count: 3, Type: "Warning", EventTime: micro,
		Series: &corev1.EventSeries{Count: 4, LastObservedTime: micro},
		Action: "A", Related: &corev1.ObjectReference{Kind: "Secret", Name: "s"},
		ReportingController: "example.com/x", ReportingInstance: "i",
	}
	raw, _ := json.Marshal(ev)
	conv := EventConverter{}
	out, err := conv.Convert(context.Background(), [][]byte{raw}, "events.k8s.io/v1")
	if err != nil || !out.Changed[0] {
		t.Fatal(err)
	}
	var v1 eventsv1.Event
	if err := json.Unmarshal(out.Objects[0], &v1); err != nil {
		t.Fatal(err)
	}
	if v1.APIVersion != "events.k8s.io/v1" || v1.Note != "m" || v1.Regarding.Name != "c" || v1.DeprecatedCount != 3 || v1.Series.Count != 4 || v1.ResourceVersion != "7" {
		t.Fatalf("events.k8s.io form %+v", v1)
	}
	back, err := conv.Convert(context.Background(), out.Objects, "v1")
	if err != nil {
		t.Fatal(err)
	}
	var again corev1.Event
	if err := json.Unmarshal(back.Objects[0], &again); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&again, ev) {
		t.Fatalf("round trip changed the event:\n%+v\n%+v", &again, ev)
	}
	// The same version comes back as it is.
	if same, _ := conv.Convert(context.Background(), [][]byte{raw}, "v1"); same.Changed[0] {
		t.Fatal("converted to its own version")
	}
}
