package integration

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	corev1apply "k8s.io/client-go/applyconfigurations/core/v1"
	metav1apply "k8s.io/client-go/applyconfigurations/meta/v1"

	"github.com/crdserver/crdserver/server"
)

// refServices are kube-apiserver v1.37.2's stored specs of the least
// Service of each kind (created in a namespace of the reference, with the
// default --service-cluster-ip-range 10.0.0.0/24), the allocated values
// written as IP and PORT.
var refServices = []struct {
	name string
	spec string
	want string
}{{
	name: "cip", spec: `{"selector":{"app":"web"},"ports":[{"port":80}]}`,
	want: `{"clusterIP":"IP","clusterIPs":["IP"],"internalTrafficPolicy":"Cluster","ipFamilies":["IPv4"],"ipFamilyPolicy":"SingleStack","ports":[{"port":80,"protocol":"TCP","targetPort":80}],"selector":{"app":"web"},"sessionAffinity":"None","type":"ClusterIP"}`,
}, {
	name: "np", spec: `{"type":"NodePort","selector":{"app":"web"},"ports":[{"port":80}]}`,
	want: `{"clusterIP":"IP","clusterIPs":["IP"],"externalTrafficPolicy":"Cluster","internalTrafficPolicy":"Cluster","ipFamilies":["IPv4"],"ipFamilyPolicy":"SingleStack","ports":[{"nodePort":PORT,"port":80,"protocol":"TCP","targetPort":80}],"selector":{"app":"web"},"sessionAffinity":"None","type":"NodePort"}`,
}, {
	name: "lb", spec: `{"type":"LoadBalancer","selector":{"app":"web"},"ports":[{"port":80}]}`,
	want: `{"allocateLoadBalancerNodePorts":true,"clusterIP":"IP","clusterIPs":["IP"],"externalTrafficPolicy":"Cluster","internalTrafficPolicy":"Cluster","ipFamilies":["IPv4"],"ipFamilyPolicy":"SingleStack","ports":[{"nodePort":PORT,"port":80,"protocol":"TCP","targetPort":80}],"selector":{"app":"web"},"sessionAffinity":"None","type":"LoadBalancer"}`,
}, {
	name: "lblocal", spec: `{"type":"LoadBalancer","externalTrafficPolicy":"Local","selector":{"app":"web"},"ports":[{"port":80}]}`,
	want: `{"allocateLoadBalancerNodePorts":true,"clusterIP":"IP","clusterIPs":["IP"],"externalTrafficPolicy":"Local","healthCheckNodePort":PORT,"internalTrafficPolicy":"Cluster","ipFamilies":["IPv4"],"ipFamilyPolicy":"SingleStack","ports":[{"nodePort":PORT,"port":80,"protocol":"TCP","targetPort":80}],"selector":{"app":"web"},"sessionAffinity":"None","type":"LoadBalancer"}`,
}, {
	name: "headless", spec: `{"clusterIP":"None","selector":{"app":"web"},"ports":[{"port":80}]}`,
	want: `{"clusterIP":"None","clusterIPs":["None"],"internalTrafficPolicy":"Cluster","ipFamilies":["IPv4"],"ipFamilyPolicy":"SingleStack","ports":[{"port":80,"protocol":"TCP","targetPort":80}],"selector":{"app":"web"},"sessionAffinity":"None","type":"ClusterIP"}`,
}, {
	name: "headless-nosel", spec: `{"clusterIP":"None","ports":[{"port":80}]}`,
	want: `{"clusterIP":"None","clusterIPs":["None"],"internalTrafficPolicy":"Cluster","ipFamilies":["IPv4","IPv6"],"ipFamilyPolicy":"RequireDualStack","ports":[{"port":80,"protocol":"TCP","targetPort":80}],"sessionAffinity":"None","type":"ClusterIP"}`,
}, {
	name: "ext", spec: `{"type":"ExternalName","externalName":"example.com"}`,
	want: `{"externalName":"example.com","sessionAffinity":"None","type":"ExternalName"}`,
}}

// maskAllocated writes a Service spec's allocated IPs and ports as IP
// and PORT, keys sorted (as refServices are), and returns them.
func maskAllocated(t *testing.T, spec corev1.ServiceSpec) (string, []string, []int32) {
	t.Helper()
	var ips []string
	var ports []int32
	spec.ClusterIPs = slices.Clone(spec.ClusterIPs)
	spec.Ports = slices.Clone(spec.Ports)
	if spec.ClusterIP != "" && spec.ClusterIP != "None" {
		ips = append(ips, spec.ClusterIPs...)
		spec.ClusterIP = "IP"
		for i := range spec.ClusterIPs {
			spec.ClusterIPs[i] = "IP"
		}
	}
	for i := range spec.Ports {
		if p := spec.Ports[i].NodePort; p != 0 {
			ports = append(ports, p)
			spec.Ports[i].NodePort = 1
		}
	}
	if spec.HealthCheckNodePort != 0 {
		ports = append(ports, spec.HealthCheckNodePort)
		spec.HealthCheckNodePort = 1
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(mustJSON(spec)), &m); err != nil {
		t.Fatal(err)
	}
	return mustJSON(m), ips, ports
}

func decodeService(t *testing.T, name, spec string) *corev1.Service {
	t.Helper()
	svc := &corev1.Service{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"}, ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := json.Unmarshal([]byte(spec), &svc.Spec); err != nil {
		t.Fatal(err)
	}
	return svc
}

// TestServiceDefaults creates the least Service of each type and
// compares what is stored with kube-apiserver's answers: the defaults,
// a cluster IP from the range, node ports from 30000-32767 (and a health
// check node port for a LoadBalancer with the Local policy).
func TestServiceDefaults(t *testing.T) {
	e := start(t)
	_, cidr, _ := net.ParseCIDR("10.0.0.0/24")
	seen := map[string]bool{}
	for _, c := range refServices {
		got, err := e.kube.CoreV1().Services("default").Create(e.ctx, decodeService(t, c.name, c.spec), metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		stored, err := e.kube.CoreV1().Services("default").Get(e.ctx, c.name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []*corev1.Service{got, stored} {
			masked, ips, ports := maskAllocated(t, s.Spec)
			want := strings.ReplaceAll(c.want, "PORT", "1")
			if masked != want {
				t.Errorf("%s: spec\n%s\nwant (kube-apiserver's)\n%s", c.name, masked, want)
			}
			for _, ip := range ips {
				if !cidr.Contains(net.ParseIP(ip)) || ip == "10.0.0.0" || ip == "10.0.0.255" {
					t.Errorf("%s: cluster IP %s", c.name, ip)
				}
			}
			for _, p := range ports {
				if p < 30000 || p > 32767 {
					t.Errorf("%s: node port %d", c.name, p)
				}
			}
			if !reflect.DeepEqual(s.Status, corev1.ServiceStatus{}) {
				t.Errorf("%s: status %+v", c.name, s.Status)
			}
		}
		for _, ip := range got.Spec.ClusterIPs {
			if ip != "None" && seen[ip] {
				t.Errorf("%s: cluster IP %s given twice", c.name, ip)
			}
			seen[ip] = true
		}
	}
	// The kubernetes Service, as kube-apiserver makes it: the range's
	// first IP, https to the server's port.
	var k *corev1.Service
	for i := 0; i < 200; i++ {
		var err error
		if k, err = e.kube.CoreV1().Services("default").Get(e.ctx, "kubernetes", metav1.GetOptions{}); err == nil {
			break
		}
		time.Sleep(25 * time.Millisecond)
	}
	if k == nil {
		t.Fatal("no kubernetes Service")
	}
	port := e.srv.URL()[strings.LastIndex(e.srv.URL(), ":")+1:]
	if k.Spec.ClusterIP != "10.0.0.1" || len(k.Spec.Ports) != 1 || k.Spec.Ports[0].Name != "https" || k.Spec.Ports[0].Port != 443 ||
		k.Spec.Ports[0].TargetPort.String() != port || k.Labels["provider"] != "kubernetes" || k.Labels["component"] != "apiserver" {
		t.Errorf("kubernetes Service %s", mustJSON(k))
	}
	if seen["10.0.0.1"] {
		t.Error("10.0.0.1 given to another Service")
	}
}

// statusCauses is what a 422 said: its message and causes.
func statusCauses(t *testing.T, err error) (string, []metav1.StatusCause) {
	t.Helper()
	var se *apierrors.StatusError
	if !errors.As(err, &se) || se.ErrStatus.Code != http.StatusUnprocessableEntity {
		t.Fatalf("%v, want 422", err)
	}
	return se.ErrStatus.Message, se.ErrStatus.Details.Causes
}

// TestCoreKindsValidation: invalid objects of each kind are refused with
// kube-apiserver v1.37.2's messages and causes (captured from it).
func TestCoreKindsValidation(t *testing.T) {
	e := start(t)
	cases := []struct {
		name, resource, body, msg string
		causes                    []metav1.StatusCause
	}{{
		name: "service without ports", resource: "services",
		body:   `{"apiVersion":"v1","kind":"Service","metadata":{"name":"bad"},"spec":{"selector":{"app":"web"}}}`,
		msg:    `Service "bad" is invalid: spec.ports: Required value`,
		causes: []metav1.StatusCause{{Type: metav1.CauseTypeFieldValueRequired, Message: "Required value", Field: "spec.ports"}},
	}, {
		name: "service of no type", resource: "services",
		body: `{"apiVersion":"v1","kind":"Service","metadata":{"name":"bad"},"spec":{"type":"Bogus","ports":[{"port":0}]}}`,
		msg:  `Service "bad" is invalid: [spec.ports[0].port: Invalid value: 0: must be between 1 and 65535, inclusive, spec.ports[0].targetPort: Invalid value: 0: must be between 1 and 65535, inclusive, spec.type: Unsupported value: "Bogus": supported values: "ClusterIP", "ExternalName", "LoadBalancer", "NodePort"]`,
		causes: []metav1.StatusCause{
			{Type: metav1.CauseTypeFieldValueInvalid, Message: "Invalid value: 0: must be between 1 and 65535, inclusive", Field: "spec.ports[0].port"},
			{Type: metav1.CauseTypeFieldValueInvalid, Message: "Invalid value: 0: must be between 1 and 65535, inclusive", Field: "spec.ports[0].targetPort"},
			{Type: metav1.CauseTypeFieldValueNotSupported, Message: `Unsupported value: "Bogus": supported values: "ClusterIP", "ExternalName", "LoadBalancer", "NodePort"`, Field: "spec.type"},
		},
	}, {
		name: "external name missing", resource: "services",
		body:   `{"apiVersion":"v1","kind":"Service","metadata":{"name":"bad"},"spec":{"type":"ExternalName"}}`,
		msg:    `Service "bad" is invalid: spec.externalName: Required value`,
		causes: []metav1.StatusCause{{Type: metav1.CauseTypeFieldValueRequired, Message: "Required value", Field: "spec.externalName"}},
	}, {
		name: "node port out of range", resource: "services",
		body:   `{"apiVersion":"v1","kind":"Service","metadata":{"name":"bad"},"spec":{"type":"NodePort","ports":[{"port":80,"nodePort":80}]}}`,
		msg:    `Service "bad" is invalid: spec.ports[0].nodePort: Invalid value: 80: provided port is not in the valid range. The range of valid ports is 30000-32767`,
		causes: []metav1.StatusCause{{Type: metav1.CauseTypeFieldValueInvalid, Message: "Invalid value: 80: provided port is not in the valid range. The range of valid ports is 30000-32767", Field: "spec.ports[0].nodePort"}},
	}, {
		name: "cluster IP out of range", resource: "services",
		body:   `{"apiVersion":"v1","kind":"Service","metadata":{"name":"bad"},"spec":{"clusterIP":"10.1.0.5","ports":[{"port":80}]}}`,
		msg:    `Service "bad" is invalid: spec.clusterIPs: Invalid value: ["10.1.0.5"]: failed to allocate IP 10.1.0.5: the provided IP (10.1.0.5) is not in the valid range. The range of valid IPs is 10.0.0.0/24`,
		causes: []metav1.StatusCause{{Type: metav1.CauseTypeFieldValueInvalid, Message: `Invalid value: ["10.1.0.5"]: failed to allocate IP 10.1.0.5: the provided IP (10.1.0.5) is not in the valid range. The range of valid IPs is 10.0.0.0/24`, Field: "spec.clusterIPs"}},
	}, {
		name: "pod without containers", resource: "pods",
		body:   `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"bad"},"spec":{}}`,
		msg:    `Pod "bad" is invalid: spec.containers: Required value`,
		causes: []metav1.StatusCause{{Type: metav1.CauseTypeFieldValueRequired, Message: "Required value", Field: "spec.containers"}},
	}, {
		name: "privileged pod", resource: "pods",
		body:   `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"bad"},"spec":{"containers":[{"name":"c","image":"nginx","securityContext":{"privileged":true}}]}}`,
		msg:    `Pod "bad" is invalid: spec.containers[0].securityContext.privileged: Forbidden: disallowed by cluster policy`,
		causes: []metav1.StatusCause{{Type: metav1.CauseType("FieldValueForbidden"), Message: "Forbidden: disallowed by cluster policy", Field: "spec.containers[0].securityContext.privileged"}},
	}, {
		name: "pod restart policy", resource: "pods",
		body:   `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"bad"},"spec":{"restartPolicy":"Sometimes","containers":[{"name":"c","image":"nginx"}]}}`,
		msg:    `Pod "bad" is invalid: spec.restartPolicy: Unsupported value: "Sometimes": supported values: "Always", "OnFailure", "Never"`,
		causes: []metav1.StatusCause{{Type: metav1.CauseTypeFieldValueNotSupported, Message: `Unsupported value: "Sometimes": supported values: "Always", "OnFailure", "Never"`, Field: "spec.restartPolicy"}},
	}, {
		name: "empty claim", resource: "persistentvolumeclaims",
		body: `{"apiVersion":"v1","kind":"PersistentVolumeClaim","metadata":{"name":"bad"},"spec":{}}`,
		msg:  `PersistentVolumeClaim "bad" is invalid: [spec.accessModes: Required value: at least 1 access mode is required, spec.resources[storage]: Required value]`,
		causes: []metav1.StatusCause{
			{Type: metav1.CauseTypeFieldValueRequired, Message: "Required value: at least 1 access mode is required", Field: "spec.accessModes"},
			{Type: metav1.CauseTypeFieldValueRequired, Message: "Required value", Field: "spec.resources[storage]"},
		},
	}, {
		name: "negative storage", resource: "persistentvolumeclaims",
		body:   `{"apiVersion":"v1","kind":"PersistentVolumeClaim","metadata":{"name":"bad"},"spec":{"accessModes":["ReadWriteOnce"],"resources":{"requests":{"storage":"-1Gi"}}}}`,
		msg:    `PersistentVolumeClaim "bad" is invalid: spec.resources[storage]: Invalid value: "-1Gi": must be greater than zero`,
		causes: []metav1.StatusCause{{Type: metav1.CauseTypeFieldValueInvalid, Message: `Invalid value: "-1Gi": must be greater than zero`, Field: "spec.resources[storage]"}},
	}, {
		name: "endpoints IP", resource: "endpoints",
		body: `{"apiVersion":"v1","kind":"Endpoints","metadata":{"name":"bad"},"subsets":[{"addresses":[{"ip":"nope"}],"ports":[{"port":80}]}]}`,
		msg:  `Endpoints "bad" is invalid: [subsets[0].addresses[0].ip: Invalid value: "nope": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff), subsets[0].addresses[0].ip: Invalid value: "nope": must be a valid IP address]`,
		causes: []metav1.StatusCause{
			{Type: metav1.CauseTypeFieldValueInvalid, Message: `Invalid value: "nope": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)`, Field: "subsets[0].addresses[0].ip"},
			{Type: metav1.CauseTypeFieldValueInvalid, Message: `Invalid value: "nope": must be a valid IP address`, Field: "subsets[0].addresses[0].ip"},
		},
	}, {
		name: "endpoints port", resource: "endpoints",
		body:   `{"apiVersion":"v1","kind":"Endpoints","metadata":{"name":"bad"},"subsets":[{"addresses":[{"ip":"10.1.2.3"}],"ports":[{"port":0}]}]}`,
		msg:    `Endpoints "bad" is invalid: subsets[0].ports[0].port: Invalid value: 0: must be between 1 and 65535, inclusive`,
		causes: []metav1.StatusCause{{Type: metav1.CauseTypeFieldValueInvalid, Message: "Invalid value: 0: must be between 1 and 65535, inclusive", Field: "subsets[0].ports[0].port"}},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.do(http.MethodPost, "/api/v1/namespaces/default/"+c.resource, c.body, "Content-Type", "application/json")
			if r.code != http.StatusUnprocessableEntity {
				t.Fatalf("%d %s", r.code, r.body)
			}
			st := r.status(t)
			if st.Message != c.msg {
				t.Errorf("message\n%s\nwant\n%s", st.Message, c.msg)
			}
			if !reflect.DeepEqual(st.Details.Causes, c.causes) {
				t.Errorf("causes\n%+v\nwant\n%+v", st.Details.Causes, c.causes)
			}
		})
	}
}

// TestServiceAllocation: cluster IPs and node ports come from the
// configured ranges; one taken is refused with kube's messages, given
// back on delete, on a type change and when a create fails after taking
// it; a full range is kube's 500.
func TestServiceAllocation(t *testing.T) {
	_, cidr, _ := net.ParseCIDR("10.96.0.0/28")
	e := start(t, func(c *server.Config) {
		c.ServiceClusterIPRanges = []*net.IPNet{cidr}
		c.ServiceNodePortRange = utilnet.PortRange{Base: 31000, Size: 4}
	})
	svcs := e.kube.CoreV1().Services("default")
	create := func(name, spec string) (*corev1.Service, error) {
		return svcs.Create(e.ctx, decodeService(t, name, spec), metav1.CreateOptions{})
	}
	a, err := create("a", `{"type":"NodePort","ports":[{"port":80}]}`)
	if err != nil {
		t.Fatal(err)
	}
	if ip := net.ParseIP(a.Spec.ClusterIP); !cidr.Contains(ip) {
		t.Fatalf("cluster IP %s not in %s", a.Spec.ClusterIP, cidr)
	}
	if p := a.Spec.Ports[0].NodePort; p < 31000 || p > 31003 {
		t.Fatalf("node port %d", p)
	}
	// The IP and the port, taken, are refused as kube refuses them.
	_, err = create("b", fmt.Sprintf(`{"clusterIP":%q,"ports":[{"port":80}]}`, a.Spec.ClusterIP))
	msg, causes := statusCauses(t, err)
	want := fmt.Sprintf(`Service "b" is invalid: spec.clusterIPs: Invalid value: ["%s"]: failed to allocate IP %s: provided IP is already allocated`, a.Spec.ClusterIP, a.Spec.ClusterIP)
	if msg != want || len(causes) != 1 || causes[0].Field != "spec.clusterIPs" || causes[0].Type != metav1.CauseTypeFieldValueInvalid {
		t.Errorf("taken IP: %s %+v\nwant %s", msg, causes, want)
	}
	_, err = create("b", fmt.Sprintf(`{"type":"NodePort","ports":[{"port":80,"nodePort":%d}]}`, a.Spec.Ports[0].NodePort))
	msg, causes = statusCauses(t, err)
	want = fmt.Sprintf(`Service "b" is invalid: spec.ports[0].nodePort: Invalid value: %d: provided port is already allocated`, a.Spec.Ports[0].NodePort)
	if msg != want || len(causes) != 1 || causes[0].Field != "spec.ports[0].nodePort" {
		t.Errorf("taken port: %s %+v\nwant %s", msg, causes, want)
	}
	// A create refused after its allocation gives the IP back.
	free := "10.96.0.14"
	if a.Spec.ClusterIP == free { // a's IP is random
		free = "10.96.0.13"
	}
	if _, err := create("c", fmt.Sprintf(`{"clusterIP":%q,"sessionAffinity":"Sometimes","ports":[{"port":80}]}`, free)); !apierrors.IsInvalid(err) {
		t.Fatalf("invalid create: %v", err)
	}
	c, err := create("c", fmt.Sprintf(`{"clusterIP":%q,"ports":[{"port":80}]}`, free))
	if err != nil || c.Spec.ClusterIP != free {
		t.Fatalf("IP of a refused create not given back: %v", err)
	}
	// A dry run takes nothing (a port a does not hold: a's is random).
	dryPort := 31000 + (a.Spec.Ports[0].NodePort-31000+1)%4
	if _, err := svcs.Create(e.ctx, decodeService(t, "d", fmt.Sprintf(`{"type":"NodePort","ports":[{"port":80,"nodePort":%d}]}`, dryPort)), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Fatal(err)
	}
	// A type change to ClusterIP gives the node port back.
	a.Spec.Type = corev1.ServiceTypeClusterIP
	a.Spec.Ports[0].NodePort = 0
	a.Spec.ExternalTrafficPolicy = ""
	if _, err = svcs.Update(e.ctx, a, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Four services take every node port.
	for i := range 4 {
		if _, err := create(fmt.Sprintf("np%d", i), `{"type":"NodePort","ports":[{"port":80}]}`); err != nil {
			t.Fatalf("node port %d: %v", i, err)
		}
	}
	_, err = create("np4", `{"type":"NodePort","ports":[{"port":80}]}`)
	if !apierrors.IsInternalError(err) || !strings.Contains(err.Error(), "range is full") {
		t.Errorf("a fifth node port: %v", err)
	}
	// Deleting gives the IP back: it can be taken again.
	if err := svcs.Delete(e.ctx, "c", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err = create("c2", fmt.Sprintf(`{"clusterIP":%q,"ports":[{"port":80}]}`, free)); err != nil {
		t.Fatalf("IP of a deleted Service: %v", err)
	}
	// 14 addresses: the kubernetes Service's, a, np0-3, c2 and seven
	// more; then the range is full.
	for i := range 7 {
		if _, err := create(fmt.Sprintf("ip%d", i), `{"ports":[{"port":80}]}`); err != nil {
			t.Fatalf("IP %d: %v", i, err)
		}
	}
	_, err = create("ip7", `{"ports":[{"port":80}]}`)
	if !apierrors.IsInternalError(err) || err.Error() != `Internal error occurred: failed to allocate a serviceIP for Service "ip7": range is full` {
		t.Errorf("a full range: %v", err)
	}
	// Headless and ExternalName Services take no IP.
	if _, err := create("headless", `{"clusterIP":"None","ports":[{"port":80}]}`); err != nil {
		t.Fatal(err)
	}
	if _, err := create("ext", `{"type":"ExternalName","externalName":"example.com"}`); err != nil {
		t.Fatal(err)
	}
}

// TestServiceAllocationReplicas: two servers on one etcd creating
// Services at the same time never give the same IP or node port.
func TestServiceAllocationReplicas(t *testing.T) {
	endpoint := startExternalEtcd(t)
	_, cidr, _ := net.ParseCIDR("10.97.0.0/26")
	cfg := func(c *server.Config) {
		c.EtcdServers = []string{endpoint}
		c.ServiceClusterIPRanges = []*net.IPNet{cidr}
		c.ServiceNodePortRange = utilnet.PortRange{Base: 32000, Size: 64}
	}
	replicas := []*env{start(t, cfg), start(t, cfg)}
	const each = 20
	var mu sync.Mutex
	ips, ports := map[string]string{}, map[int32]string{}
	var wg sync.WaitGroup
	errs := make(chan error, 2*each)
	for r, e := range replicas {
		for i := range each {
			wg.Go(func() {
				name := fmt.Sprintf("s%d-%d", r, i)
				got, err := e.kube.CoreV1().Services("default").Create(e.ctx, decodeService(t, name, `{"type":"NodePort","ports":[{"port":80}]}`), metav1.CreateOptions{})
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				defer mu.Unlock()
				if other, ok := ips[got.Spec.ClusterIP]; ok {
					errs <- fmt.Errorf("%s and %s both got %s", other, name, got.Spec.ClusterIP)
				}
				ips[got.Spec.ClusterIP] = name
				if other, ok := ports[got.Spec.Ports[0].NodePort]; ok {
					errs <- fmt.Errorf("%s and %s both got node port %d", other, name, got.Spec.Ports[0].NodePort)
				}
				ports[got.Spec.Ports[0].NodePort] = name
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if len(ips) != 2*each {
		t.Errorf("%d IPs for %d Services", len(ips), 2*each)
	}
	// Both replicas made the one kubernetes Service.
	list, err := replicas[1].kube.CoreV1().Services("default").List(replicas[1].ctx, metav1.ListOptions{FieldSelector: "metadata.name=kubernetes"})
	if err != nil || len(list.Items) != 1 || list.Items[0].Spec.ClusterIP != "10.97.0.1" {
		t.Errorf("kubernetes Service: %v %+v", err, list)
	}
}

// TestCoreKindsDefaultsAndStatus: the stored defaults of a Pod, a
// PersistentVolumeClaim and Endpoints (kube-apiserver v1.37.2's, less
// what its admission plugins crdserver does not run add: ServiceAccount's
// service account and token volume, Priority's priority,
// DefaultTolerationSeconds' tolerations, StorageObjectInUseProtection's
// finalizer), their status subresources and Endpoints' warning.
func TestCoreKindsDefaultsAndStatus(t *testing.T) {
	e := start(t)
	pods := e.kube.CoreV1().Pods("default")
	p, err := pods.Create(e.ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pod"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const refPodSpec = `{"containers":[{"name":"c","image":"nginx","resources":{},"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File","imagePullPolicy":"Always"}],"restartPolicy":"Always","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst","securityContext":{},"schedulerName":"default-scheduler","enableServiceLinks":true}`
	if g := mustJSON(p.Spec); g != refPodSpec {
		t.Errorf("pod spec\n%s\nwant\n%s", g, refPodSpec)
	}
	// kube's pod strategy: a new Pod is Pending, of QoS class BestEffort.
	if p.Status.Phase != corev1.PodPending || p.Status.QOSClass != corev1.PodQOSBestEffort || p.Generation != 1 {
		t.Errorf("pod status %+v generation %d", p.Status, p.Generation)
	}
	p.Status.Phase = corev1.PodRunning
	p.Spec.ActiveDeadlineSeconds = ptr[int64](5) // the status subresource keeps the spec
	if p, err = pods.UpdateStatus(e.ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if p.Status.Phase != corev1.PodRunning || p.Spec.ActiveDeadlineSeconds != nil {
		t.Errorf("after status update: phase %s, deadline %v", p.Status.Phase, p.Spec.ActiveDeadlineSeconds)
	}
	// Field selectors of Pods.
	for sel, n := range map[string]int{"status.phase=Running": 1, "status.phase=Pending": 0, "spec.nodeName=": 1, "spec.restartPolicy=Always,spec.hostNetwork=false": 1} {
		list, err := pods.List(e.ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil || len(list.Items) != n {
			t.Errorf("%s: %v %d pods, want %d", sel, err, len(list.Items), n)
		}
	}
	if _, err := pods.List(e.ctx, metav1.ListOptions{FieldSelector: "spec.image=x"}); !apierrors.IsBadRequest(err) {
		t.Errorf("unknown field label: %v", err)
	}
	// A Pod no node runs goes at once.
	if err := pods.Delete(e.ctx, "pod", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := pods.Get(e.ctx, "pod", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("deleted pod: %v", err)
	}

	pvcs := e.kube.CoreV1().PersistentVolumeClaims("default")
	c, err := pvcs.Create(e.ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "pvc"}, Spec: corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const refPVC = `{"spec":{"accessModes":["ReadWriteOnce"],"resources":{"requests":{"storage":"1Gi"}},"volumeMode":"Filesystem"},"status":{"phase":"Pending"}}`
	if g := mustJSON(map[string]any{"spec": c.Spec, "status": c.Status}); g != refPVC {
		t.Errorf("pvc\n%s\nwant\n%s", g, refPVC)
	}
	c.Status.Phase = corev1.ClaimBound
	if c, err = pvcs.UpdateStatus(e.ctx, c, metav1.UpdateOptions{}); err != nil || c.Status.Phase != corev1.ClaimBound {
		t.Fatalf("pvc status: %v %+v", err, c.Status)
	}

	body := `{"apiVersion":"v1","kind":"Endpoints","metadata":{"name":"ep"},"subsets":[{"addresses":[{"ip":"10.1.2.3"}],"ports":[{"port":80}]}]}`
	r := e.do(http.MethodPost, "/api/v1/namespaces/default/endpoints", body, "Content-Type", "application/json")
	if r.code != http.StatusCreated || !slices.Contains(r.header.Values("Warning"), `299 - "v1 Endpoints is deprecated in v1.33+; use discovery.k8s.io/v1 EndpointSlice"`) {
		t.Fatalf("endpoints: %d %v %s", r.code, r.header, r.body)
	}
	var ep corev1.Endpoints //nolint:staticcheck // v1 Endpoints are served as kube serves them
	if err := json.Unmarshal(r.body, &ep); err != nil || mustJSON(ep.Subsets) != `[{"addresses":[{"ip":"10.1.2.3"}],"ports":[{"port":80,"protocol":"TCP"}]}]` {
		t.Errorf("endpoints %v %s", err, r.body)
	}
}

// TestCoreKindsPatches: a strategic merge patch and a server-side apply
// of a Service keep what was allocated, and managedFields name their
// managers.
func TestCoreKindsPatches(t *testing.T) {
	e := start(t)
	svcs := e.kube.CoreV1().Services("default")
	ac := corev1apply.Service("web", "default").WithSpec(corev1apply.ServiceSpec().
		WithSelector(map[string]string{"app": "web"}).WithPorts(corev1apply.ServicePort().WithName("http").WithPort(80)))
	got, err := svcs.Apply(e.ctx, ac, metav1.ApplyOptions{FieldManager: "applier"})
	if err != nil {
		t.Fatal(err)
	}
	ip := got.Spec.ClusterIP
	if ip == "" || got.Spec.Ports[0].TargetPort != intstr.FromInt32(80) {
		t.Fatalf("applied %s", mustJSON(got.Spec))
	}
	got, err = svcs.Patch(e.ctx, "web", types.StrategicMergePatchType, []byte(`{"spec":{"ports":[{"name":"metrics","port":9090}]}}`), metav1.PatchOptions{FieldManager: "patcher"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Spec.Ports) != 2 || got.Spec.ClusterIP != ip {
		t.Fatalf("after the patch: %s", mustJSON(got.Spec))
	}
	// Applied again, the applier's port stays and the patcher's too; the
	// cluster IP (no one's field) is kept.
	got, err = svcs.Apply(e.ctx, ac.WithLabels(map[string]string{"a": "b"}), metav1.ApplyOptions{FieldManager: "applier"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Spec.Ports) != 2 || got.Spec.ClusterIP != ip || got.Labels["a"] != "b" {
		t.Fatalf("after the second apply: %s", mustJSON(got))
	}
	var managers []string
	for _, m := range got.ManagedFields {
		managers = append(managers, m.Manager)
	}
	if !slices.Contains(managers, "applier") || !slices.Contains(managers, "patcher") {
		t.Errorf("managers %v", managers)
	}
	// Status by apply, on its subresource.
	st := corev1apply.Service("web", "default").WithStatus(corev1apply.ServiceStatus().WithConditions(
		metav1apply.Condition().WithType("Ready").WithStatus(metav1.ConditionTrue).WithReason("Checked").WithMessage("").WithLastTransitionTime(metav1.Now())))
	got, err = svcs.ApplyStatus(e.ctx, st, metav1.ApplyOptions{FieldManager: "checker", Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Status.Conditions) != 1 || got.Status.Conditions[0].Reason != "Checked" || len(got.Spec.Ports) != 2 {
		t.Errorf("status %+v", got.Status)
	}
}

// TestCoreKindsTablesAndDiscovery: kubectl's tables as kube-apiserver
// prints them, and discovery's short names, categories and subresources.
func TestCoreKindsTablesAndDiscovery(t *testing.T) {
	e := start(t)
	if _, err := e.kube.CoreV1().Services("default").Create(e.ctx, decodeService(t, "np", `{"type":"NodePort","selector":{"app":"web"},"ports":[{"port":80}]}`), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.kube.CoreV1().Pods("default").Create(e.ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pod"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.kube.CoreV1().PersistentVolumeClaims("default").Create(e.ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "pvc"}, Spec: corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	//nolint:staticcheck // v1 Endpoints are served as kube serves them
	if _, err := e.kube.CoreV1().Endpoints("default").Create(e.ctx, &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "ep"}, Subsets: []corev1.EndpointSubset{{
		Addresses: []corev1.EndpointAddress{{IP: "10.1.2.3"}}, Ports: []corev1.EndpointPort{{Port: 80}}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// kube-apiserver v1.37.2's columns and cells (but Age and the
	// allocated values).
	cases := []struct {
		path  string
		cols  []string
		cells func(svcIP string) []any
	}{
		{"services/np", []string{"Name", "Type", "Cluster-IP", "External-IP", "Port(s)", "Age", "Selector"}, nil},
		{"pods/pod", []string{"Name", "Ready", "Status", "Restarts", "Age", "IP", "Node", "Nominated Node", "Readiness Gates"},
			func(string) []any {
				return []any{"pod", "0/1", "Pending", "0", "AGE", "<none>", "<none>", "<none>", "<none>"}
			}},
		{"persistentvolumeclaims/pvc", []string{"Name", "Status", "Volume", "Capacity", "Access Modes", "StorageClass", "VolumeAttributesClass", "Age", "VolumeMode"},
			func(string) []any { return []any{"pvc", "Pending", "", "", "", "", "<unset>", "AGE", "Filesystem"} }},
		{"endpoints/ep", []string{"Name", "Endpoints", "Age"}, func(string) []any { return []any{"ep", "10.1.2.3:80", "AGE"} }},
	}
	for _, c := range cases {
		r := e.do(http.MethodGet, "/api/v1/namespaces/default/"+c.path, "", "Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
		var tbl metav1.Table
		if err := json.Unmarshal(r.body, &tbl); err != nil || r.code != http.StatusOK || len(tbl.Rows) != 1 {
			t.Fatalf("%s: %d %v %s", c.path, r.code, err, r.body)
		}
		var cols []string
		for _, d := range tbl.ColumnDefinitions {
			cols = append(cols, d.Name)
		}
		if !slices.Equal(cols, c.cols) {
			t.Errorf("%s: columns %v, want %v", c.path, cols, c.cols)
		}
		cells := tbl.Rows[0].Cells
		if c.cells == nil {
			s, _ := e.kube.CoreV1().Services("default").Get(e.ctx, "np", metav1.GetOptions{})
			want := []any{"np", "NodePort", s.Spec.ClusterIP, "<none>", fmt.Sprintf("80:%d/TCP", s.Spec.Ports[0].NodePort), cells[5], "app=web"}
			if !reflect.DeepEqual(cells, want) {
				t.Errorf("%s: cells %v, want %v", c.path, cells, want)
			}
			continue
		}
		want := c.cells("")
		for i, w := range want {
			if w == "AGE" {
				want[i] = cells[i]
			}
		}
		if !reflect.DeepEqual(cells, want) {
			t.Errorf("%s: cells %#v, want %#v", c.path, cells, want)
		}
	}

	list, err := e.kube.Discovery().ServerResourcesForGroupVersion("v1")
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]metav1.APIResource{}
	for _, r := range list.APIResources {
		found[r.Name] = r
	}
	for name, want := range map[string]struct {
		short      []string
		categories []string
	}{"services": {[]string{"svc"}, []string{"all"}}, "pods": {[]string{"po"}, []string{"all"}}, "endpoints": {[]string{"ep"}, nil}, "persistentvolumeclaims": {[]string{"pvc"}, nil}} {
		r := found[name]
		if !slices.Equal(r.ShortNames, want.short) || !slices.Equal(r.Categories, want.categories) || !r.Namespaced {
			t.Errorf("%s in discovery: %+v", name, r)
		}
	}
	for _, sub := range []string{"services/status", "pods/status", "persistentvolumeclaims/status"} {
		if _, ok := found[sub]; !ok {
			t.Errorf("no %s in discovery", sub)
		}
	}
	if _, ok := found["endpoints/status"]; ok {
		t.Error("endpoints/status in discovery")
	}
}

// TestCoreKindsRBAC: the default edit role writes Pods, Services and
// claims but not Endpoints; view reads all four, as kube's bootstrap
// policy says.
func TestCoreKindsRBAC(t *testing.T) {
	e := start(t)
	edit, view := e.editAndView()
	editor, viewer := edit.CoreV1(), view.CoreV1()
	var err error
	// The aggregated roles follow their parts' rules a moment later.
	for i := 0; i < 100; i++ {
		if _, err = editor.Services("default").Create(e.ctx, decodeService(t, "web", `{"ports":[{"port":80}]}`), metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("create service as edit: %v", err)
	}
	if _, err := editor.Pods("default").Create(e.ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pod"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod as edit: %v", err)
	}
	//nolint:staticcheck // v1 Endpoints are served as kube serves them
	if _, err := editor.Endpoints("default").Create(e.ctx, &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "ep"}}, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("create endpoints as edit: %v, want Forbidden", err)
	}
	if _, err := viewer.Endpoints("default").List(e.ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("list endpoints as view: %v", err)
	}
	for _, get := range []func() error{
		func() error { _, err := viewer.Services("default").Get(e.ctx, "web", metav1.GetOptions{}); return err },
		func() error { _, err := viewer.Pods("default").Get(e.ctx, "pod", metav1.GetOptions{}); return err },
		func() error {
			_, err := viewer.PersistentVolumeClaims("default").List(e.ctx, metav1.ListOptions{})
			return err
		},
	} {
		if err := get(); err != nil {
			t.Errorf("read as view: %v", err)
		}
	}
	if err := viewer.Pods("default").Delete(e.ctx, "pod", metav1.DeleteOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("delete pod as view: %v, want Forbidden", err)
	}
}

// TestPodGracefulDeletion: a Pod on a node is deleted gracefully, as
// kube-apiserver v1.37.2 deletes it with no kubelet to end it (the same
// requests sent to it gave the same answers): kept with its deletion
// timestamp and grace period (the spec's 30 s), a second delete changes
// nothing, a shorter grace period shortens it, a longer one does not, and
// a grace period of 0 writes it marked, then deletes it. Deletes of Pods,
// Services, PersistentVolumeClaims and ServiceAccounts answer with the
// object, as kube's registries do; those of ConfigMaps with a Status.
func TestPodGracefulDeletion(t *testing.T) {
	e := start(t)
	pods := e.kube.CoreV1().Pods("default")
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "on-node"}, Spec: corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}}
	created, err := pods.Create(e.ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := pods.Watch(e.ctx, metav1.ListOptions{FieldSelector: "metadata.name=on-node", ResourceVersion: created.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	del := func(query string) (*corev1.Pod, int) {
		t.Helper()
		r := e.do(http.MethodDelete, "/api/v1/namespaces/default/pods/on-node"+query, "")
		var p corev1.Pod
		if err := json.Unmarshal(r.body, &p); err != nil || p.Kind != "Pod" {
			t.Fatalf("delete%s: %d %s", query, r.code, r.body)
		}
		return &p, r.code
	}
	grace := func(p *corev1.Pod) int64 {
		if p.DeletionTimestamp == nil || p.DeletionGracePeriodSeconds == nil {
			t.Fatalf("not marked deleted: %+v", p.ObjectMeta)
		}
		return *p.DeletionGracePeriodSeconds
	}
	before := time.Now()
	p, code := del("")
	if code != http.StatusOK || grace(p) != 30 || p.Generation != 2 {
		t.Fatalf("first delete: %d, grace %d, generation %d", code, grace(p), p.Generation)
	}
	// The deletion timestamp is when the grace period ends.
	if d := p.DeletionTimestamp.Sub(before); d < 29*time.Second || d > 32*time.Second {
		t.Errorf("deletion timestamp %v after the delete, want 30 s", d)
	}
	first := p.DeletionTimestamp
	if p, _ = del(""); grace(p) != 30 || !p.DeletionTimestamp.Equal(first) || p.Generation != 2 {
		t.Errorf("second delete changed the pod: grace %d, %v, generation %d", grace(p), p.DeletionTimestamp, p.Generation)
	}
	if p, _ = del("?gracePeriodSeconds=10"); grace(p) != 10 || !p.DeletionTimestamp.Time.Equal(first.Add(-20*time.Second)) {
		t.Errorf("shortened to 10 s: grace %d, %v (was %v)", grace(p), p.DeletionTimestamp, first)
	}
	if p, _ = del("?gracePeriodSeconds=40"); grace(p) != 10 {
		t.Errorf("lengthened: grace %d", grace(p))
	}
	if p, _ = del("?gracePeriodSeconds=0&dryRun=All"); grace(p) != 0 {
		t.Errorf("dry run at 0: grace %d", grace(p))
	}
	if _, err := pods.Get(e.ctx, "on-node", metav1.GetOptions{}); err != nil {
		t.Fatalf("after a dry run: %v", err)
	}
	if p, _ = del("?gracePeriodSeconds=0"); grace(p) != 0 {
		t.Errorf("deleted at 0: grace %d", grace(p))
	}
	if _, err := pods.Get(e.ctx, "on-node", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("deleted pod: %v", err)
	}
	// A watcher saw each mark (the 30 s, the 10 s, the 0 s), then the deletion.
	var events []string
	for len(events) < 4 {
		select {
		case ev := <-w.ResultChan():
			events = append(events, fmt.Sprintf("%s %d", ev.Type, grace(ev.Object.(*corev1.Pod))))
		case <-time.After(10 * time.Second):
			t.Fatalf("events %v", events)
		}
	}
	if want := []string{"MODIFIED 30", "MODIFIED 10", "MODIFIED 0", "DELETED 0"}; !slices.Equal(events, want) {
		t.Errorf("events %v, want %v", events, want)
	}

	// A foreground delete: the garbage collector takes its finalizer off
	// (the Pod has no dependents), and the Pod stays for its grace period
	// all the same, as on Kubernetes.
	pod.ResourceVersion = ""
	if _, err := pods.Create(e.ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if p, _ = del("?propagationPolicy=Foreground"); grace(p) != 30 || !slices.Equal(p.Finalizers, []string{metav1.FinalizerDeleteDependents}) {
		t.Fatalf("foreground delete: grace %d, finalizers %v", grace(p), p.Finalizers)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		p, err := pods.Get(e.ctx, "on-node", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("a pod in its grace period: %v", err)
		}
		if len(p.Finalizers) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the garbage collector left the finalizers %v", p.Finalizers)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := pods.Get(e.ctx, "on-node", metav1.GetOptions{}); err != nil {
		t.Fatalf("finalizers gone, grace period not over: %v", err)
	}
	if err := pods.Delete(e.ctx, "on-node", metav1.DeleteOptions{GracePeriodSeconds: ptr[int64](0)}); err != nil {
		t.Fatal(err)
	}

	// A finalizer keeps a Pod no node runs, marked with no grace period.
	pod = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "kept", Finalizers: []string{"example.com/x"}}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}}
	if _, err := pods.Create(e.ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	r := e.do(http.MethodDelete, "/api/v1/namespaces/default/pods/kept", "")
	var kept corev1.Pod
	if err := json.Unmarshal(r.body, &kept); err != nil || r.code != http.StatusOK || grace(&kept) != 0 || kept.Generation != 2 {
		t.Fatalf("kept pod: %d %s", r.code, r.body)
	}
	// Kept after a delete that asked for its dependents to be deleted
	// (the deprecated orphanDependents=false): 202 Accepted, as
	// kube-apiserver's delete handler answers.
	if r := e.do(http.MethodDelete, "/api/v1/namespaces/default/pods/kept?orphanDependents=false", ""); r.code != http.StatusAccepted {
		t.Errorf("kept pod, orphanDependents=false: %d %s", r.code, r.body)
	}

	// What a delete answers.
	if _, err := e.kube.CoreV1().ServiceAccounts("default").Create(e.ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "sa"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.kube.CoreV1().ConfigMaps("default").Create(e.ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.kube.CoreV1().Services("default").Create(e.ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "svc"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for path, kind := range map[string]string{"serviceaccounts/sa": "ServiceAccount", "services/svc": "Service", "configmaps/cm": "Status"} {
		r := e.do(http.MethodDelete, "/api/v1/namespaces/default/"+path, "")
		var got struct {
			Kind     string
			Metadata metav1.ObjectMeta
		}
		if err := json.Unmarshal(r.body, &got); err != nil || r.code != http.StatusOK || got.Kind != kind {
			t.Errorf("delete %s: %d %s, want a %s", path, r.code, r.body, kind)
		}
		if kind != "Status" && (got.Metadata.Name != path[strings.Index(path, "/")+1:] || got.Metadata.ResourceVersion == "") {
			t.Errorf("delete %s answered %+v", path, got.Metadata)
		}
	}
}
