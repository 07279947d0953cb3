package e2e

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// Ports for processes the tests start (etcd members, webhooks) are chosen
// here rather than by the kernel, because a port found by listening on :0
// and closing again is only free for a moment: the kernel hands the same
// ephemeral port to the next :0 listener or outgoing connection (CI once
// saw two etcd members given the same peer port). So a port is drawn
// below the machine's ephemeral range, where neither happens, never handed
// out twice by this process, and checked free by binding it.
var (
	portsMu   sync.Mutex
	portsUsed = map[int]bool{}
)

// freePort is a TCP port on 127.0.0.1, free when checked, outside the
// ephemeral range and not returned before by this test process.
func freePort() (int, error) {
	lo, hi := 20000, ephemeralStart()
	if hi-lo < 1000 {
		lo, hi = 10000, 20000
	}
	portsMu.Lock()
	defer portsMu.Unlock()
	for range 200 {
		p := lo + rand.IntN(hi-lo)
		if portsUsed[p] {
			continue
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue
		}
		_ = ln.Close()
		portsUsed[p] = true
		return p, nil
	}
	return 0, fmt.Errorf("no free port found in [%d, %d)", lo, hi)
}

// ephemeralStart is the first port of the kernel's ephemeral range
// (Linux's default 32768 where it cannot be read).
func ephemeralStart() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 32768
	}
	n, err := strconv.Atoi(f[0])
	if err != nil || n <= 0 {
		return 32768
	}
	return n
}
