package robustness

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// logBuffer is a process's output, safe for concurrent writes.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// proc is one process the run started, that a fault may kill, stop and
// start again.
type proc struct {
	name   string
	args   func() []string // the arguments of each start
	log    *logBuffer
	cmd    *exec.Cmd
	exited chan struct{}
	frozen bool
	starts int
}

func (p *proc) start(bin string) error {
	p.starts++
	fmt.Fprintf(p.log, "=== start %d: %s %s\n", p.starts, bin, strings.Join(p.args(), " "))
	p.cmd = exec.Command(bin, p.args()...)
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	p.exited = make(chan struct{})
	if err := p.cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	done := p.exited
	go func() {
		_ = p.cmd.Wait()
		close(done)
	}()
	return nil
}

func (p *proc) running() bool {
	if p.exited == nil {
		return false
	}
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// kill sends SIGKILL and waits for the process to go.
func (p *proc) kill() {
	if !p.running() {
		return
	}
	if p.frozen {
		p.thaw()
	}
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// terminate sends SIGTERM and waits up to a minute for the process to
// exit, then kills it.
func (p *proc) terminate() error {
	if !p.running() {
		return nil
	}
	if p.frozen {
		p.thaw()
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return nil
	case <-time.After(time.Minute):
		p.kill()
		return fmt.Errorf("%s did not exit within a minute of SIGTERM", p.name)
	}
}

func (p *proc) freeze() {
	if p.running() && p.cmd.Process.Signal(syscall.SIGSTOP) == nil {
		p.frozen = true
	}
}

func (p *proc) thaw() {
	if p.frozen {
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
		p.frozen = false
	}
}

// freePort returns a loopback port below the ephemeral range that nothing
// listens on, and that this process has not handed out before: a
// process restarted on its port gets it back.
func freePort() (int, error) {
	portsMu.Lock()
	defer portsMu.Unlock()
	for range 500 {
		p := 20000 + rand.IntN(12000)
		if portsUsed[p] {
			continue
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue
		}
		ln.Close()
		portsUsed[p] = true
		return p, nil
	}
	return 0, fmt.Errorf("no free loopback port found")
}

// freeURLs are an etcd member's client and peer URLs on free ports.
func freeURLs() (client, peer string, err error) {
	cp, err := freePort()
	if err != nil {
		return "", "", err
	}
	pp, err := freePort()
	if err != nil {
		return "", "", err
	}
	return fmt.Sprintf("http://127.0.0.1:%d", cp), fmt.Sprintf("http://127.0.0.1:%d", pp), nil
}

var (
	portsMu   sync.Mutex
	portsUsed = map[int]bool{}
)

// etcdCluster is a cluster of etcd processes on loopback.
type etcdCluster struct {
	members []*etcdMember
}

type etcdMember struct {
	proc
	clientURL string
}

func startEtcd(dir string, n int) (*etcdCluster, error) {
	c := &etcdCluster{}
	token := fmt.Sprintf("robustness-%d", time.Now().UnixNano())
	var peers []string
	type urls struct{ client, peer string }
	var us []urls
	for i := range n {
		client, peer, err := freeURLs()
		if err != nil {
			return nil, err
		}
		u := urls{client, peer}
		us = append(us, u)
		peers = append(peers, fmt.Sprintf("m%d=%s", i, u.peer))
	}
	for i, u := range us {
		m := &etcdMember{clientURL: u.client}
		m.name = fmt.Sprintf("etcd-m%d", i)
		m.log = &logBuffer{}
		data := filepath.Join(dir, fmt.Sprintf("etcd-m%d", i))
		m.args = func() []string {
			state := "new"
			if m.starts > 1 {
				state = "existing"
			}
			return []string{"--name", fmt.Sprintf("m%d", i), "--data-dir", data,
				"--listen-client-urls", u.client, "--advertise-client-urls", u.client,
				"--listen-peer-urls", u.peer, "--initial-advertise-peer-urls", u.peer,
				"--initial-cluster", strings.Join(peers, ","), "--initial-cluster-state", state,
				"--initial-cluster-token", token, "--log-level", "warn"}
		}
		c.members = append(c.members, m)
	}
	for _, m := range c.members {
		if err := m.start(etcdBin); err != nil {
			return nil, err
		}
	}
	return c, c.waitHealthy(time.Minute)
}

func (c *etcdCluster) endpoints() []string {
	var out []string
	for _, m := range c.members {
		out = append(out, m.clientURL)
	}
	return out
}

func (c *etcdCluster) client() (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{Endpoints: c.endpoints(), DialTimeout: 5 * time.Second, Logger: quietZap()})
}

// status asks member i whether it leads.
func (c *etcdCluster) status(i int) (leader, ok bool) {
	client := http.Client{Timeout: time.Second}
	resp, err := client.Post(c.members[i].clientURL+"/v3/maintenance/status", "application/json", strings.NewReader("{}"))
	if err != nil {
		return false, false
	}
	defer resp.Body.Close()
	var st struct {
		Header struct {
			MemberID string `json:"member_id"`
		} `json:"header"`
		Leader string `json:"leader"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&st) != nil {
		return false, false
	}
	return st.Leader != "" && st.Leader == st.Header.MemberID, true
}

// leader returns the index of the leading member, or -1 after a while.
func (c *etcdCluster) leader() int {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for i, m := range c.members {
			if m.frozen || !m.running() {
				continue
			}
			if l, ok := c.status(i); ok && l {
				return i
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return -1
}

// waitHealthy waits until every running member answers /health.
func (c *etcdCluster) waitHealthy(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	client := http.Client{Timeout: time.Second}
	for time.Now().Before(deadline) {
		healthy := 0
		for _, m := range c.members {
			resp, err := client.Get(m.clientURL + "/health")
			if err != nil {
				continue
			}
			var h struct{ Health string }
			_ = json.NewDecoder(resp.Body).Decode(&h)
			resp.Body.Close()
			if h.Health == "true" {
				healthy++
			}
		}
		if healthy == len(c.members) {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("the etcd cluster is not healthy after %v", timeout)
}

func (c *etcdCluster) stop() {
	for _, m := range c.members {
		m.kill()
	}
}

// replica is one crdserver process.
type replica struct {
	proc
	index   int
	dataDir string
	port    int
	url     string // the same at every start (its port is kept)
	// proxies stand between the replica and each etcd member (none on the
	// embedded store).
	proxies []*proxy
	client  *http.Client // the admin's, for the harness's own requests
	cfg     *rest.Config
}

var servingURL = regexp.MustCompile(`msg="crdserver is serving".* url=(https?://\S+)`)

// newReplica prepares replica i on dir: on the embedded store when
// endpoints is empty.
func newReplica(i int, dir string, endpoints []string, caDir string) (*replica, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	r := &replica{index: i, dataDir: filepath.Join(dir, fmt.Sprintf("crdserver-%d", i)), port: port, url: fmt.Sprintf("https://127.0.0.1:%d", port)}
	r.name = fmt.Sprintf("crdserver-%d", i)
	r.log = &logBuffer{}
	var etcdArgs []string
	if len(endpoints) > 0 {
		var via []string
		for _, e := range endpoints {
			p, err := startProxy(strings.TrimPrefix(e, "http://"))
			if err != nil {
				return nil, err
			}
			r.proxies = append(r.proxies, p)
			via = append(via, "http://"+p.addr())
		}
		etcdArgs = []string{"--etcd-servers", strings.Join(via, ",")}
	}
	if caDir != "" {
		etcdArgs = append(etcdArgs, "--ca-cert-file", filepath.Join(caDir, "ca.crt"), "--ca-key-file", filepath.Join(caDir, "ca.key"))
	}
	r.args = func() []string {
		return append([]string{"--data-dir", r.dataDir, "--bind-address", "127.0.0.1", "--port", strconv.Itoa(r.port),
			// The run compacts etcd itself (the compaction fault), when and
			// where the truth records it.
			"--etcd-compaction-interval", "0",
		}, etcdArgs...)
	}
	return r, nil
}

// run starts the replica and waits until /readyz says ok.
func (r *replica) run(timeout time.Duration) error {
	if err := r.start(crdserverBin); err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	kubeconfig := filepath.Join(r.dataDir, "admin.kubeconfig")
	for {
		if !r.running() {
			return fmt.Errorf("%s exited before it was ready; its log ends:\n%s", r.name, tail(r.log.String(), 30))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s is not ready after %v; its log ends:\n%s", r.name, timeout, tail(r.log.String(), 30))
		}
		if r.client == nil && servingURL.MatchString(r.log.String()) {
			cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
			if err != nil {
				return err
			}
			cfg.QPS, cfg.Burst = -1, 0
			hc, err := rest.HTTPClientFor(cfg)
			if err != nil {
				return err
			}
			hc.Timeout = 5 * time.Second
			r.cfg, r.client = cfg, hc
		}
		if r.client != nil && r.ready() {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ready reports whether /readyz answers ok.
func (r *replica) ready() bool {
	if r.client == nil {
		return false
	}
	resp, err := r.client.Get(r.url + "/readyz")
	if err != nil {
		return false
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK && strings.TrimSpace(string(body)) == "ok"
}

// waitReady waits until the replica is ready again after a fault.
func (r *replica) waitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for !r.ready() {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%s is not ready %v after the fault; its log ends:\n%s", r.name, timeout, tail(r.log.String(), 30))
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil
}

// panicked reports a panic or a data race crdserver logged.
func (r *replica) panicked() string {
	log := r.log.String()
	for _, marker := range []string{"panic:", "WARNING: DATA RACE", "fatal error:"} {
		if i := strings.Index(log, marker); i >= 0 {
			return tail(log[i:], 40)
		}
	}
	return ""
}

func (r *replica) close() {
	r.kill()
	for _, p := range r.proxies {
		p.close()
	}
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// writeFile writes data under dir, making dir.
func writeFile(dir, name string, data []byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, name), data, 0o644)
}
