package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// etcdBin is etcd v3.7 built from the Go module proxy by TestMain (the
// version crdserver embeds), for tests that need an etcd cluster of
// processes: to stop, kill and freeze members.
var etcdBin string

// etcdMember is one etcd process of a cluster on loopback.
type etcdMember struct {
	name, dir           string
	clientURL, peerURL  string
	initialCluster, tok string
	cmd                 *exec.Cmd
	log                 *syncBuffer
	exited              chan struct{}
	frozen              bool
	restarts            int
}

// etcdCluster is a cluster of etcd processes on loopback ports.
type etcdCluster struct {
	t       *testing.T
	members []*etcdMember
}

func mustFreePort(t *testing.T) int {
	t.Helper()
	p, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// startEtcdCluster starts n members and waits until the cluster answers;
// they are killed when the test ends.
func startEtcdCluster(t *testing.T, n int) *etcdCluster {
	t.Helper()
	c := &etcdCluster{t: t}
	token := fmt.Sprintf("crdserver-e2e-%d", time.Now().UnixNano())
	var initial []string
	for i := 0; i < n; i++ {
		m := &etcdMember{
			name:      fmt.Sprintf("m%d", i),
			dir:       filepath.Join(t.TempDir(), "etcd"),
			clientURL: fmt.Sprintf("http://127.0.0.1:%d", mustFreePort(t)),
			peerURL:   fmt.Sprintf("http://127.0.0.1:%d", mustFreePort(t)),
			tok:       token,
		}
		initial = append(initial, m.name+"="+m.peerURL)
		c.members = append(c.members, m)
	}
	for i, m := range c.members {
		m.initialCluster = strings.Join(initial, ",")
		c.start(i)
	}
	t.Cleanup(func() {
		for _, m := range c.members {
			if m.running() {
				if m.frozen {
					_ = m.cmd.Process.Signal(syscall.SIGCONT)
				}
				_ = m.cmd.Process.Kill()
				<-m.exited
			}
		}
	})
	c.waitHealthy(time.Minute)
	return c
}

// endpoints are the members' client URLs, as --etcd-servers takes them.
func (c *etcdCluster) endpoints() string {
	var urls []string
	for _, m := range c.members {
		urls = append(urls, m.clientURL)
	}
	return strings.Join(urls, ",")
}

func (m *etcdMember) running() bool {
	if m.exited == nil {
		return false
	}
	select {
	case <-m.exited:
		return false
	default:
		return true
	}
}

// start starts member i (again, on its data dir after a stop).
func (c *etcdCluster) start(i int) {
	c.t.Helper()
	m := c.members[i]
	state := "new"
	if m.restarts > 0 {
		state = "existing"
	}
	m.restarts++
	m.log = &syncBuffer{}
	m.exited = make(chan struct{})
	m.cmd = exec.Command(etcdBin,
		"--name", m.name, "--data-dir", m.dir,
		"--listen-client-urls", m.clientURL, "--advertise-client-urls", m.clientURL,
		"--listen-peer-urls", m.peerURL, "--initial-advertise-peer-urls", m.peerURL,
		"--initial-cluster", m.initialCluster, "--initial-cluster-state", state,
		"--initial-cluster-token", m.tok, "--log-level", "warn")
	m.cmd.Stdout, m.cmd.Stderr = m.log, m.log
	if err := m.cmd.Start(); err != nil {
		c.t.Fatalf("start etcd %s: %v", m.name, err)
	}
	go func() {
		_ = m.cmd.Wait()
		close(m.exited)
	}()
}

// stop kills member i (SIGKILL: the harshest way a member goes).
func (c *etcdCluster) stop(i int) {
	m := c.members[i]
	if m.frozen {
		c.thaw(i)
	}
	_ = m.cmd.Process.Kill()
	<-m.exited
}

// freeze stops member i's process (SIGSTOP): it keeps its sockets but
// answers nothing, as a hung machine does.
func (c *etcdCluster) freeze(i int) {
	c.t.Helper()
	if err := c.members[i].cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		c.t.Fatal(err)
	}
	c.members[i].frozen = true
}

func (c *etcdCluster) thaw(i int) {
	c.t.Helper()
	if err := c.members[i].cmd.Process.Signal(syscall.SIGCONT); err != nil {
		c.t.Fatal(err)
	}
	c.members[i].frozen = false
}

// status asks member i for its maintenance status through etcd's JSON
// gateway: whether it is the leader, and whether it answered at all.
func (c *etcdCluster) status(i int) (leader bool, ok bool) {
	client := http.Client{Timeout: time.Second}
	resp, err := client.Post(c.members[i].clientURL+"/v3/maintenance/status", "application/json", bytes.NewReader([]byte("{}")))
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

// leader returns the index of the member that leads.
func (c *etcdCluster) leader() int {
	c.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		for i, m := range c.members {
			if m.frozen || !m.running() {
				continue
			}
			if leader, ok := c.status(i); ok && leader {
				return i
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.t.Fatal("no etcd member leads")
	return -1
}

// waitHealthy waits until a quorum answers /health.
func (c *etcdCluster) waitHealthy(timeout time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	client := http.Client{Timeout: time.Second}
	for time.Now().Before(deadline) {
		healthy := 0
		for _, m := range c.members {
			if m.frozen || !m.running() {
				continue
			}
			resp, err := client.Get(m.clientURL + "/health")
			if err == nil {
				var h struct{ Health string }
				_ = json.NewDecoder(resp.Body).Decode(&h)
				resp.Body.Close()
				if h.Health == "true" {
					healthy++
				}
			}
		}
		if healthy > len(c.members)/2 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	var logs strings.Builder
	for _, m := range c.members {
		lines := strings.Split(m.log.String(), "\n")
		fmt.Fprintf(&logs, "--- %s (last lines):\n%s\n", m.name, strings.Join(lines[max(0, len(lines)-15):], "\n"))
	}
	c.t.Fatalf("the etcd cluster did not become healthy within %v:\n%s", timeout, logs.String())
}
