package corekinds

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/uuid"
	api "k8s.io/kubernetes/pkg/apis/core"
	"k8s.io/kubernetes/pkg/registry/core/service/ipallocator"
	"k8s.io/kubernetes/pkg/registry/core/service/portallocator"
	netutils "k8s.io/utils/net"

	"github.com/crdserver/crdserver/internal/store"
)

// The etcd keys of what Services hold: an IPAddress per allocated cluster
// IP (kube-apiserver's key and object), a key per allocated node port.
const (
	IPAddressPrefix = "/registry/ipaddresses/"
	NodePortPrefix  = "/registry/servicenodeports/"
)

// DefaultServiceClusterIPRange and DefaultNodePortRange are
// kube-apiserver's defaults of --service-cluster-ip-range and
// --service-node-port-range.
var (
	DefaultServiceClusterIPRange = &net.IPNet{IP: net.IPv4(10, 0, 0, 0).To4(), Mask: net.CIDRMask(24, 32)}
	DefaultNodePortRange         = utilnet.PortRange{Base: 30000, Size: 2768}
)

// ServiceAllocation is where Services' cluster IPs and node ports come
// from: the ranges, and the store that records who holds what.
type ServiceAllocation struct {
	// Store records the allocations.
	Store store.Interface
	// ClusterIPRanges are --service-cluster-ip-range: one CIDR, or two
	// of different families (the first is the default family).
	ClusterIPRanges []*net.IPNet
	// NodePorts is --service-node-port-range.
	NodePorts utilnet.PortRange
	// pool keeps kube's Service RESTs on these ranges (serviceREST)
	// between allocations.
	pool sync.Pool
}

// NewServiceAllocation is a ServiceAllocation on st with kube-apiserver's
// defaults for what ranges leaves unset.
func NewServiceAllocation(st store.Interface, ranges []*net.IPNet, nodePorts utilnet.PortRange) *ServiceAllocation {
	if len(ranges) == 0 {
		ranges = []*net.IPNet{DefaultServiceClusterIPRange}
	}
	if nodePorts.Size == 0 {
		nodePorts = DefaultNodePortRange
	}
	return &ServiceAllocation{Store: st, ClusterIPRanges: ranges, NodePorts: nodePorts}
}

// owner is the Service an allocation is for.
type owner struct{ namespace, name string }

// family is the IP family of a CIDR.
func family(cidr *net.IPNet) api.IPFamily {
	if netutils.IsIPv6CIDR(cidr) {
		return api.IPv6Protocol
	}
	return api.IPv4Protocol
}

// ipRange is the addresses of a CIDR a Service may get: all but the
// network address and, for IPv4, the broadcast address. Dynamic
// allocation prefers the upper band, past offset addresses, leaving the
// lower band for addresses asked for (kube's KEP-3070).
type ipRange struct {
	cidr        *net.IPNet
	family      api.IPFamily
	first, last netip.Addr
	offset      uint64
}

func newIPRange(cidr *net.IPNet) ipRange {
	prefix, _ := netip.ParsePrefix(cidr.String())
	prefix = prefix.Masked()
	first := prefix.Addr().Next()
	last := prefix.Addr()
	host := last.BitLen() - prefix.Bits()
	b := last.AsSlice()
	for i := len(b) - 1; i >= 0 && host > 0; i-- {
		n := min(host, 8)
		b[i] |= byte(1<<n - 1)
		host -= n
	}
	last, _ = netip.AddrFromSlice(b)
	r := ipRange{cidr: cidr, family: family(cidr), first: first, last: last}
	if r.family == api.IPv4Protocol {
		r.last = last.Prev()
	}
	// min(max(16, size/16), 256), none for ranges of 16 or fewer.
	if size := netutils.RangeSize(cidr); size > 16 {
		r.offset = uint64(min(max(16, size/16), 256))
	}
	return r
}

func (r ipRange) contains(ip netip.Addr) bool {
	return r.first.IsValid() && ip.Compare(r.first) >= 0 && ip.Compare(r.last) <= 0
}

// bands are the ranges dynamic allocation tries in turn.
func (r ipRange) bands() [][2]netip.Addr {
	if r.offset == 0 {
		return [][2]netip.Addr{{r.first, r.last}}
	}
	mid := addOffset(r.first, r.offset)
	return [][2]netip.Addr{{mid, r.last}, {r.first, mid.Prev()}}
}

// ipAllocator is kube's ipallocator.Interface on the store, for one
// Service (which its IPAddress objects name).
type ipAllocator struct {
	ctx   context.Context
	st    store.Interface
	r     ipRange
	owner owner
	dry   bool
}

var _ ipallocator.Interface = &ipAllocator{}

func ipKey(ip netip.Addr) string { return IPAddressPrefix + ip.String() }

func (a *ipAllocator) parse(ip net.IP) (netip.Addr, error) {
	addr, ok := netip.AddrFromSlice(ip)
	if !ok {
		return netip.Addr{}, &ipallocator.ErrNotInRange{IP: ip, ValidRange: a.r.cidr.String()}
	}
	addr = addr.Unmap()
	if !a.r.contains(addr) {
		return netip.Addr{}, &ipallocator.ErrNotInRange{IP: ip, ValidRange: a.r.cidr.String()}
	}
	return addr, nil
}

// Allocate takes ip; a dry run only checks it is in the range, as kube's.
func (a *ipAllocator) Allocate(ip net.IP) error {
	addr, err := a.parse(ip)
	if err != nil || a.dry {
		return err
	}
	return a.take(addr)
}

// take creates ip's IPAddress, unless it exists.
func (a *ipAllocator) take(ip netip.Addr) error {
	obj := networkingv1.IPAddress{
		TypeMeta: metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "IPAddress"},
		ObjectMeta: metav1.ObjectMeta{
			Name: ip.String(), UID: uuid.NewUUID(), CreationTimestamp: metav1.NewTime(time.Now()),
			Labels: map[string]string{
				networkingv1.LabelIPAddressFamily: string(a.r.family),
				networkingv1.LabelManagedBy:       ipallocator.ControllerName,
			},
		},
		Spec: networkingv1.IPAddressSpec{ParentRef: &networkingv1.ParentReference{Resource: "services", Namespace: a.owner.namespace, Name: a.owner.name}},
	}
	data, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	_, err = a.st.Create(a.ctx, ipKey(ip), data, store.WriteOptions{})
	if errors.Is(err, store.ErrExists) {
		return ipallocator.ErrAllocated
	}
	return err
}

// AllocateNext takes a free IP: the stored IPAddresses are read once, and
// the free addresses after a random one in the upper band, then the
// lower band, are taken in turn until one is created (another server may
// take one first). A dry run answers the network address, as kube's.
func (a *ipAllocator) AllocateNext() (net.IP, error) {
	if a.dry {
		return a.r.cidr.IP, nil
	}
	taken, err := a.taken()
	if err != nil {
		return nil, err
	}
	for _, band := range a.r.bands() {
		size := addrDistance(band[0], band[1]) + 1
		ip := addOffset(band[0], rand.Uint64N(size))
		// Each step is a taken address or a create; at most the
		// band's size of them.
		for range size {
			if !taken[ip] {
				err := a.take(ip)
				if err == nil {
					return ip.AsSlice(), nil
				}
				if !errors.Is(err, ipallocator.ErrAllocated) {
					return nil, err
				}
				taken[ip] = true
			}
			if ip = ip.Next(); ip.Compare(band[1]) > 0 {
				ip = band[0]
			}
		}
	}
	return nil, ipallocator.ErrFull
}

// addrDistance is how many addresses lie from a to b, capped below what
// a uint64 holds.
func addrDistance(a, b netip.Addr) uint64 {
	x, y := a.As16(), b.As16()
	if [8]byte(x[:8]) != [8]byte(y[:8]) {
		return math.MaxUint64 - 1
	}
	return min(binary.BigEndian.Uint64(y[8:])-binary.BigEndian.Uint64(x[8:]), math.MaxUint64-1)
}

// addOffset is the address n after a (within its upper 64 bits' block).
func addOffset(a netip.Addr, n uint64) netip.Addr {
	x := a.As16()
	binary.BigEndian.PutUint64(x[8:], binary.BigEndian.Uint64(x[8:])+n)
	out := netip.AddrFrom16(x)
	if a.Is4() {
		out = out.Unmap()
	}
	return out
}

// taken are the addresses of the range with an IPAddress.
func (a *ipAllocator) taken() (map[netip.Addr]bool, error) {
	res, err := a.st.List(a.ctx, IPAddressPrefix, prefixEnd(IPAddressPrefix), 0, 0)
	if err != nil {
		return nil, err
	}
	out := map[netip.Addr]bool{}
	for _, kv := range res.KVs {
		if ip, err := netip.ParseAddr(strings.TrimPrefix(kv.Key, IPAddressPrefix)); err == nil && a.r.contains(ip) {
			out[ip] = true
		}
	}
	return out, nil
}

// Release deletes ip's IPAddress if it names this allocator's Service.
func (a *ipAllocator) Release(ip net.IP) error {
	addr, ok := netip.AddrFromSlice(ip)
	if a.dry || !ok {
		return nil
	}
	key := ipKey(addr.Unmap())
	kv, _, err := a.st.Get(a.ctx, key, 0)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	var obj networkingv1.IPAddress
	if err := json.Unmarshal(kv.Value, &obj); err != nil {
		return err
	}
	if p := obj.Spec.ParentRef; p == nil || p.Resource != "services" || p.Namespace != a.owner.namespace || p.Name != a.owner.name {
		return nil
	}
	if _, _, err := a.st.Delete(a.ctx, key, kv.ModRevision); err != nil && !errors.Is(err, store.ErrNotFound) && !errors.Is(err, store.ErrConflict) {
		return err
	}
	return nil
}

// ForEach calls f with every allocated IP of the range.
func (a *ipAllocator) ForEach(f func(net.IP)) {
	taken, err := a.taken()
	if err != nil {
		return
	}
	for ip := range taken {
		f(ip.AsSlice())
	}
}

// Has says whether ip is allocated.
func (a *ipAllocator) Has(ip net.IP) bool {
	addr, ok := netip.AddrFromSlice(ip)
	if !ok {
		return false
	}
	_, _, err := a.st.Get(a.ctx, ipKey(addr.Unmap()), 0)
	return err == nil
}

func (a *ipAllocator) CIDR() net.IPNet        { return *a.r.cidr }
func (a *ipAllocator) IPFamily() api.IPFamily { return a.r.family }
func (a *ipAllocator) Destroy()               {}
func (a *ipAllocator) EnableMetrics()         {}
func (a *ipAllocator) DryRun() ipallocator.Interface {
	d := *a
	d.dry = true
	return &d
}

// portAllocator is kube's portallocator.Interface on the store, for one
// Service. Dynamic allocation prefers the upper band of the range as
// kube's does.
type portAllocator struct {
	ctx   context.Context
	st    store.Interface
	r     utilnet.PortRange
	owner owner
}

var _ portallocator.Interface = &portAllocator{}

func portKey(port int) string { return NodePortPrefix + strconv.Itoa(port) }

// nodePortHolder is what a node port's key holds: its Service.
type nodePortHolder struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// Allocate takes port.
func (a *portAllocator) Allocate(port int) error {
	if !a.r.Contains(port) {
		return &portallocator.ErrNotInRange{ValidPorts: a.r.String()}
	}
	data, err := json.Marshal(nodePortHolder{Namespace: a.owner.namespace, Name: a.owner.name})
	if err != nil {
		return err
	}
	_, err = a.st.Create(a.ctx, portKey(port), data, store.WriteOptions{})
	if errors.Is(err, store.ErrExists) {
		return portallocator.ErrAllocated
	}
	return err
}

// taken are the allocated ports.
func (a *portAllocator) taken() (map[int]bool, error) {
	res, err := a.st.List(a.ctx, NodePortPrefix, prefixEnd(NodePortPrefix), 0, 0)
	if err != nil {
		return nil, err
	}
	out := map[int]bool{}
	for _, kv := range res.KVs {
		if p, err := strconv.Atoi(strings.TrimPrefix(kv.Key, NodePortPrefix)); err == nil {
			out[p] = true
		}
	}
	return out, nil
}

// AllocateNext takes a free port, as ipAllocator.AllocateNext takes an IP.
func (a *portAllocator) AllocateNext() (int, error) {
	taken, err := a.taken()
	if err != nil {
		return 0, err
	}
	// min(max(16, size/32), 128), none for ranges of 16 or fewer.
	offset := 0
	if a.r.Size > 16 {
		offset = min(max(16, a.r.Size/32), 128)
	}
	bands := [][2]int{{a.r.Base + offset, a.r.Base + a.r.Size - 1}}
	if offset > 0 {
		bands = append(bands, [2]int{a.r.Base, a.r.Base + offset - 1})
	}
	for _, b := range bands {
		size := b[1] - b[0] + 1
		start := rand.IntN(size)
		for i := range size {
			port := b[0] + (start+i)%size
			if taken[port] {
				continue
			}
			err := a.Allocate(port)
			if err == nil {
				return port, nil
			}
			if !errors.Is(err, portallocator.ErrAllocated) {
				return 0, err
			}
		}
	}
	return 0, portallocator.ErrFull
}

// Release deletes port's key if it names this allocator's Service.
func (a *portAllocator) Release(port int) error {
	kv, _, err := a.st.Get(a.ctx, portKey(port), 0)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	var h nodePortHolder
	if err := json.Unmarshal(kv.Value, &h); err != nil || h.Namespace != a.owner.namespace || h.Name != a.owner.name {
		return err
	}
	if _, _, err := a.st.Delete(a.ctx, kv.Key, kv.ModRevision); err != nil && !errors.Is(err, store.ErrNotFound) && !errors.Is(err, store.ErrConflict) {
		return err
	}
	return nil
}

// ForEach calls f with every allocated port.
func (a *portAllocator) ForEach(f func(int)) {
	taken, err := a.taken()
	if err != nil {
		return
	}
	for p := range taken {
		f(p)
	}
}

// Has says whether port is allocated.
func (a *portAllocator) Has(port int) bool {
	_, _, err := a.st.Get(a.ctx, portKey(port), 0)
	return err == nil
}

func (a *portAllocator) Destroy()       {}
func (a *portAllocator) EnableMetrics() {}

// prefixEnd is the end of the key range of prefix.
func prefixEnd(prefix string) string {
	return prefix[:len(prefix)-1] + string(prefix[len(prefix)-1]+1)
}

func (o owner) String() string { return fmt.Sprintf("%s/%s", o.namespace, o.name) }
