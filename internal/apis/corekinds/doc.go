// Package corekinds is the part of the core v1 API served with Kubernetes'
// own registry code (through kuberegistry): Services, Endpoints, Pods and
// PersistentVolumeClaims, stored as kube-apiserver stores them with no
// controllers or kubelet running, as envtest does. A Service's cluster IPs
// and node ports are allocated by kube's Service REST hooks, on
// allocators kept in the store: one key per allocated IP (a
// networking.k8s.io/v1 IPAddress at /registry/ipaddresses/<ip>, as
// kube-apiserver's MultiCIDRServiceAllocator writes it) and per node port
// (/registry/servicenodeports/<port>), each taken by a create that fails
// when the key exists, so that replicas on one etcd never hand out the
// same one.
package corekinds
