package corekinds

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"testing"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/kubernetes/pkg/registry/core/service/ipallocator"
	"k8s.io/kubernetes/pkg/registry/core/service/portallocator"

	"github.com/crdserver/crdserver/internal/store"
)

func testStore(t testing.TB) store.Interface {
	t.Helper()
	e, err := store.StartEmbedded(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return store.New(e.Client)
}

func cidr(t testing.TB, s string) *net.IPNet {
	t.Helper()
	_, n, err := net.ParseCIDR(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestIPRange: the addresses a range gives (not the network address, nor
// IPv4's broadcast address) and its bands, as kube's allocator.
func TestIPRange(t *testing.T) {
	for _, c := range []struct {
		cidr, first, last, mid string
		offset                 uint64
	}{
		{"10.0.0.0/24", "10.0.0.1", "10.0.0.254", "10.0.0.17", 16},
		{"10.0.0.0/28", "10.0.0.1", "10.0.0.14", "", 0},
		{"10.0.0.0/16", "10.0.0.1", "10.0.255.254", "10.0.1.1", 256},
		{"fd00::/108", "fd00::1", "fd00::f:ffff", "fd00::101", 256},
		{"fd00::/64", "fd00::1", "fd00::ffff:ffff:ffff:ffff", "fd00::101", 256},
	} {
		r := newIPRange(cidr(t, c.cidr))
		if r.first.String() != c.first || r.last.String() != c.last || r.offset != c.offset {
			t.Errorf("%s: %s-%s offset %d", c.cidr, r.first, r.last, r.offset)
		}
		bands := r.bands()
		if c.mid == "" {
			if len(bands) != 1 || bands[0] != [2]netip.Addr{r.first, r.last} {
				t.Errorf("%s: bands %v", c.cidr, bands)
			}
			continue
		}
		if len(bands) != 2 || bands[0][0].String() != c.mid || bands[0][1] != r.last || bands[1][0] != r.first || bands[1][1] != bands[0][0].Prev() {
			t.Errorf("%s: bands %v", c.cidr, bands)
		}
	}
	if d := addrDistance(netip.MustParseAddr("fd00::1"), netip.MustParseAddr("fd01::1")); d != ^uint64(0)-1 {
		t.Errorf("distance across 64 bits: %d", d)
	}
}

// TestIPAllocator: an IP is taken once; a small range is handed out
// whole, then full; only its Service gives an IP back; a dry run takes
// nothing.
func TestIPAllocator(t *testing.T) {
	st := testStore(t)
	ctx := context.Background()
	r := newIPRange(cidr(t, "10.1.0.0/29"))
	a := &ipAllocator{ctx: ctx, st: st, r: r, owner: owner{"ns", "a"}}
	b := &ipAllocator{ctx: ctx, st: st, r: r, owner: owner{"ns", "b"}}
	err := a.Allocate(net.ParseIP("10.2.0.1"))
	var nr *ipallocator.ErrNotInRange
	if !errors.As(err, &nr) || err.Error() != "the provided IP (10.2.0.1) is not in the valid range. The range of valid IPs is 10.1.0.0/29" {
		t.Fatalf("out of range: %v", err)
	}
	if err := a.Allocate(net.ParseIP("10.1.0.7")); err == nil {
		t.Fatal("the broadcast address was given")
	}
	if err := a.Allocate(net.ParseIP("10.1.0.3")); err != nil {
		t.Fatal(err)
	}
	if err := b.Allocate(net.ParseIP("10.1.0.3")); !errors.Is(err, ipallocator.ErrAllocated) {
		t.Fatalf("taken twice: %v", err)
	}
	if err := b.DryRun().Allocate(net.ParseIP("10.1.0.4")); err != nil || b.Has(net.ParseIP("10.1.0.4")) {
		t.Fatalf("dry run: %v", err)
	}
	seen := map[string]bool{"10.1.0.3": true}
	for range 5 {
		ip, err := b.AllocateNext()
		if err != nil {
			t.Fatal(err)
		}
		if seen[ip.String()] || !r.contains(netip.MustParseAddr(ip.String())) {
			t.Fatalf("%s given again or out of range", ip)
		}
		seen[ip.String()] = true
	}
	if _, err := b.AllocateNext(); !errors.Is(err, ipallocator.ErrFull) {
		t.Fatalf("full range: %v", err)
	}
	// b does not give back a's IP; a does.
	if err := b.Release(net.ParseIP("10.1.0.3")); err != nil || !a.Has(net.ParseIP("10.1.0.3")) {
		t.Fatalf("released by another Service: %v", err)
	}
	if err := a.Release(net.ParseIP("10.1.0.3")); err != nil || a.Has(net.ParseIP("10.1.0.3")) {
		t.Fatalf("released by its Service: %v", err)
	}
	if ip, err := b.AllocateNext(); err != nil || ip.String() != "10.1.0.3" {
		t.Fatalf("the IP given back: %v %v", ip, err)
	}
	n := 0
	a.ForEach(func(net.IP) { n++ })
	if n != 6 {
		t.Errorf("ForEach saw %d IPs, want 6", n)
	}
}

// TestPortAllocator: ports as IPs, with kube's messages.
func TestPortAllocator(t *testing.T) {
	st := testStore(t)
	ctx := context.Background()
	pr := utilnet.PortRange{Base: 30000, Size: 3}
	a := &portAllocator{ctx: ctx, st: st, r: pr, owner: owner{"ns", "a"}}
	b := &portAllocator{ctx: ctx, st: st, r: pr, owner: owner{"ns", "b"}}
	if err := a.Allocate(80); err == nil || err.Error() != "provided port is not in the valid range. The range of valid ports is 30000-30002" {
		t.Fatalf("out of range: %v", err)
	}
	if err := a.Allocate(30001); err != nil {
		t.Fatal(err)
	}
	if err := b.Allocate(30001); !errors.Is(err, portallocator.ErrAllocated) {
		t.Fatalf("taken twice: %v", err)
	}
	for range 2 {
		if p, err := b.AllocateNext(); err != nil || p == 30001 {
			t.Fatalf("next: %d %v", p, err)
		}
	}
	if _, err := b.AllocateNext(); !errors.Is(err, portallocator.ErrFull) {
		t.Fatalf("full range: %v", err)
	}
	if err := b.Release(30001); err != nil || !a.Has(30001) {
		t.Fatalf("released by another Service: %v", err)
	}
	if err := a.Release(30001); err != nil || a.Has(30001) {
		t.Fatalf("released by its Service: %v", err)
	}
}

// BenchmarkServiceREST measures getting kube's Service REST, which each
// allocation does (from the pool, but for the first).
func BenchmarkServiceREST(b *testing.B) {
	s := serviceStrategy{alloc: NewServiceAllocation(nil, nil, utilnet.PortRange{})}
	for b.Loop() {
		_, done, err := s.rest(context.Background(), owner{"ns", "svc"})
		if err != nil {
			b.Fatal(err)
		}
		done()
	}
}
