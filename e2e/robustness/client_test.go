package robustness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/crdserver/crdserver/e2e/robustness/check"
)

// The traffic's objects: custom resources of two CRDs (one served in two
// versions through the conversion webhook) and ConfigMaps, a few names in
// two namespaces, so that clients contend for them.
const (
	group      = "robustness.example.com"
	groupLabel = "robustness.crdserver.io/group"
)

var (
	namespaces = []string{"rb-a", "rb-b"}
	objNames   = []string{"obj-0", "obj-1", "obj-2", "obj-3", "obj-4"}
	groups     = []string{"a", "b"}
)

// resource is one resource of the traffic.
type resource struct {
	name     string   // the plural, the first part of a check.Key
	kind     string   // its kind
	versions []string // the versions clients use; the first is stored
	core     bool     // a core/v1 resource (ConfigMaps)
}

var resources = []*resource{
	{name: "widgets", kind: "Widget", versions: []string{"v1"}},
	{name: "gadgets", kind: "Gadget", versions: []string{"v1", "v2"}},
	{name: "configmaps", kind: "ConfigMap", versions: []string{"v1"}, core: true},
}

// path is the URL path of the collection (name "") or of one object, in
// one namespace or all (ns "").
func (r *resource) path(version, ns, name string) string {
	p := "/apis/" + group + "/" + version
	if r.core {
		p = "/api/v1"
	}
	if ns != "" {
		p += "/namespaces/" + ns
	}
	p += "/" + r.name
	if name != "" {
		p += "/" + name
	}
	return p
}

func (r *resource) apiVersion(version string) string {
	if r.core {
		return "v1"
	}
	return group + "/" + version
}

// pad makes every object about half a KiB, as small objects are.
var pad = strings.Repeat("x", 400)

// object is the whole object a create, update or apply writes.
func (r *resource) object(version, ns, name, writeID, grp string, rv int64) []byte {
	md := map[string]any{"name": name, "namespace": ns, "labels": map[string]string{groupLabel: grp}}
	if rv != 0 {
		md["resourceVersion"] = strconv.FormatInt(rv, 10)
	}
	obj := map[string]any{"apiVersion": r.apiVersion(version), "kind": r.kind, "metadata": md}
	switch {
	case r.core:
		obj["data"] = map[string]string{"value": writeID, "pad": pad}
	case version == "v2":
		obj["spec"] = map[string]string{"data": writeID, "pad": pad}
	default:
		obj["spec"] = map[string]string{"value": writeID, "pad": pad}
	}
	b, _ := json.Marshal(obj)
	return b
}

// patch is the merge patch that writes writeID and the group.
func (r *resource) patch(version, writeID, grp string) []byte {
	p := map[string]any{"metadata": map[string]any{"labels": map[string]string{groupLabel: grp}}}
	switch {
	case r.core:
		p["data"] = map[string]string{"value": writeID}
	case version == "v2":
		p["spec"] = map[string]string{"data": writeID}
	default:
		p["spec"] = map[string]string{"value": writeID}
	}
	b, _ := json.Marshal(p)
	return b
}

// wireObject is what the checks read of an object in any version.
type wireObject struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name            string            `json:"name"`
		Namespace       string            `json:"namespace"`
		ResourceVersion string            `json:"resourceVersion"`
		Labels          map[string]string `json:"labels"`
		Annotations     map[string]string `json:"annotations"`
		Continue        string            `json:"continue"`
	} `json:"metadata"`
	Spec struct {
		Value string `json:"value"`
		Data  string `json:"data"`
	} `json:"spec"`
	Data struct {
		Value string `json:"value"`
	} `json:"data"`
	// A Status.
	Code    int    `json:"code"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
	Details struct {
		Name string `json:"name"`
	} `json:"details"`
}

func (o *wireObject) obj(resource string) check.Obj {
	rev, _ := strconv.ParseInt(o.Metadata.ResourceVersion, 10, 64)
	id := o.Spec.Value
	if id == "" {
		id = o.Spec.Data
	}
	if id == "" {
		id = o.Data.Value
	}
	return check.Obj{Key: check.Key(resource, o.Metadata.Namespace, o.Metadata.Name), Rev: rev, WriteID: id, Group: o.Metadata.Labels[groupLabel]}
}

// decodeStatus reads the reason of a Status answer.
func decodeStatus(body []byte) (string, int) {
	var o wireObject
	if json.Unmarshal(body, &o) != nil || o.Kind != "Status" {
		return "", 0
	}
	return o.Reason, o.Code
}

// recorder keeps the history the clients make. Times are nanoseconds
// since the run started, on the monotonic clock.
type recorder struct {
	start time.Time
	mu    sync.Mutex
	h     check.History
	ids   int
	// delivered holds revisions recent watches delivered, for watches that
	// resume from them.
	delivered []deliveredRev
}

type deliveredRev struct {
	watch int
	rev   int64
}

func (rc *recorder) now() int64 { return int64(time.Since(rc.start)) }

func (rc *recorder) nextID() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.ids++
	return rc.ids
}

func (rc *recorder) addOp(op check.Op) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.h.Ops = append(rc.h.Ops, op)
}

func (rc *recorder) addList(l check.List) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.h.Lists = append(rc.h.Lists, l)
}

func (rc *recorder) addWatch(w check.Watch) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.h.Watches = append(rc.h.Watches, w)
}

func (rc *recorder) noteDelivered(watch int, rev int64) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.delivered = append(rc.delivered, deliveredRev{watch, rev})
	if len(rc.delivered) > 200 {
		rc.delivered = append(rc.delivered[:0], rc.delivered[100:]...)
	}
}

func (rc *recorder) history() *check.History {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	h := rc.h
	return &h
}

// answer is one HTTP exchange's outcome.
type answer struct {
	code int
	body []byte
	err  error
	// unsent: the connection was refused, nothing was sent.
	unsent bool
}

// do sends one request (not a watch) to base, bounded by the client's
// timeout.
func do(ctx context.Context, hc *http.Client, method, base, path, contentType string, body []byte) answer {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
	if err != nil {
		return answer{err: err}
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "crdserver-robustness")
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return answer{err: err, unsent: errors.Is(err, syscall.ECONNREFUSED)}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		// The status came, the body did not: the outcome is unknown.
		return answer{err: fmt.Errorf("%d, then reading the body: %w", resp.StatusCode, err)}
	}
	return answer{code: resp.StatusCode, body: b}
}

// query encodes list or watch parameters.
func query(kv ...string) string {
	v := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			v.Set(kv[i], kv[i+1])
		}
	}
	if len(v) == 0 {
		return ""
	}
	return "?" + v.Encode()
}

// selectors are the query parameters of a scope's selectors.
func selectors(s check.Scope) []string {
	var kv []string
	if s.Group != "" {
		kv = append(kv, "labelSelector", groupLabel+"="+s.Group)
	}
	if s.Name != "" {
		kv = append(kv, "fieldSelector", "metadata.name="+s.Name)
	}
	return kv
}

func shortErr(err error) string {
	if err == nil {
		return ""
	}
	s := err.Error()
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}
