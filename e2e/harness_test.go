package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// The binaries under test, built once by TestMain.
var (
	crdserverBin string
	kubectlBin   string
	helmBin      string
)

// Bounds on waiting. They only stop a broken run from hanging; no test
// asserts how long anything takes.
const (
	startTimeout   = 2 * time.Minute // crdserver launch until /readyz is ok
	stopTimeout    = 2 * time.Minute // SIGTERM until the process has exited
	commandTimeout = 2 * time.Minute // one kubectl command
	eventTimeout   = time.Minute     // one expected watch event or output line
)

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	binDir, err := os.MkdirTemp("", "crdserver-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(binDir)

	// `go test` runs TestMain before its -timeout alarm starts, so the first,
	// slow build of kubectl does not count against the tests' time limit.
	crdserverBin = filepath.Join(binDir, "crdserver")
	kubectlBin = filepath.Join(binDir, "kubectl")
	helmBin = filepath.Join(binDir, "helm")
	etcdBin = filepath.Join(binDir, "etcd")
	// The two builds run side by side; Go's build cache makes them quick
	// after the first time (then they only link).
	fmt.Fprintln(os.Stderr, "e2e: building crdserver, kubectl, etcd and helm (the first builds of kubectl and helm take minutes)")
	var wg sync.WaitGroup
	var crdserverErr, kubectlErr, etcdErr, helmErr error
	wg.Go(func() { crdserverErr = goBuild("..", crdserverBin, "./cmd/crdserver") })
	wg.Go(func() { kubectlErr = goBuild(".", kubectlBin, "./kubectl") })
	// etcd at the version crdserver's module pins, for the replica tests.
	wg.Go(func() { etcdErr = goBuild("..", etcdBin, "go.etcd.io/etcd/server/v3") })
	// Helm v3 at the version go.mod pins as a tool, for helm_test.go.
	wg.Go(func() { helmErr = goBuild(".", helmBin, "helm.sh/helm/v3/cmd/helm") })
	wg.Wait()
	if err := errors.Join(crdserverErr, kubectlErr, etcdErr, helmErr); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	sourceDirs, err = listSourceDirs()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	return m.Run()
}

// goBuild runs `go build -o out pkg` in dir.
func goBuild(dir, out, pkg string) error {
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = dir
	if output, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s (in %s): %w\n%s", pkg, dir, err, output)
	}
	return nil
}

// The binaries are built outside the test binary, so `go test` does not
// know that a cached test result depends on their sources. It does record
// the files and folders a test reads (once the tests run, not in TestMain),
// with the size and modification time of every file in a folder read, and
// reruns the test when one of them changes. So every test reads the folders
// of crdserver's packages and of ./kubectl, and the modules' go.mod files.
var (
	sourceDirs      []string
	readSourcesOnce sync.Once
	sourceFilesToo  = []string{"../go.mod", "../go.sum", "go.mod", "go.sum"}
)

func listSourceDirs() ([]string, error) {
	cmd := exec.Command("go", "list", "-e", "-f", "{{.Dir}}", "./...")
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list ./... in the crdserver module: %w", err)
	}
	return append(strings.Fields(string(out)), "kubectl"), nil
}

func readSources() {
	readSourcesOnce.Do(func() {
		for _, dir := range sourceDirs {
			_, _ = os.ReadDir(dir)
		}
		for _, f := range sourceFilesToo {
			_, _ = os.Stat(f)
		}
	})
}

// server is one crdserver process with its data folder.
type server struct {
	dataDir    string
	kubeconfig string // dataDir/admin.kubeconfig, written by crdserver
	url        string // https://127.0.0.1:PORT, from the "crdserver is serving" log line
	// args are more flags for crdserver (each start uses them).
	args []string

	cmd     *exec.Cmd
	log     *syncBuffer   // everything the process wrote to stderr and stdout
	exited  chan struct{} // closed when the process has exited; then waitErr is set
	waitErr error
}

// startServer starts crdserver on a fresh data folder and stops it when the
// test ends, checking that it exits cleanly.
func startServer(t *testing.T, args ...string) *server {
	t.Helper()
	readSources()
	s := &server{dataDir: t.TempDir(), args: args}
	s.start(t)
	t.Cleanup(func() {
		if s.running() {
			s.stop(t)
		}
	})
	return s
}

var servingURL = regexp.MustCompile(`msg="crdserver is serving".* url=(https?://\S+)`)

// start runs crdserver on a random loopback port on s.dataDir, and returns
// once /readyz answers ok.
func (s *server) start(t *testing.T) {
	t.Helper()
	s.log = &syncBuffer{}
	s.exited = make(chan struct{})
	s.waitErr = nil
	s.cmd = exec.Command(crdserverBin, append([]string{"--data-dir", s.dataDir, "--bind-address", "127.0.0.1", "--port", "0"}, s.args...)...)
	s.cmd.Stdout = s.log
	stderr, err := s.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("start crdserver: %v", err)
	}

	// Copy stderr into the log, and pick the URL out of the line that says
	// the server is serving.
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(s.log, line)
			if m := servingURL.FindStringSubmatch(line); m != nil {
				select {
				case urls <- m[1]:
				default:
				}
			}
		}
		_, _ = io.Copy(s.log, stderr)
		s.waitErr = s.cmd.Wait()
		close(s.exited)
	}()

	deadline := time.NewTimer(startTimeout)
	defer deadline.Stop()
	select {
	case s.url = <-urls:
	case <-s.exited:
		t.Fatalf("crdserver exited before serving (%v); its log:\n%s", s.waitErr, s.log)
	case <-deadline.C:
		s.kill()
		t.Fatalf("crdserver did not log %q within %v; its log:\n%s", "crdserver is serving", startTimeout, s.log)
	}
	s.kubeconfig = filepath.Join(s.dataDir, "admin.kubeconfig")
	s.waitReady(t, deadline.C)
	t.Logf("crdserver is serving on %s (data dir %s)", s.url, s.dataDir)
}

// waitReady polls /readyz until it answers 200 "ok".
func (s *server) waitReady(t *testing.T, deadline <-chan time.Time) {
	t.Helper()
	// The admin kubeconfig is written before the server says it serves.
	client, err := rest.HTTPClientFor(s.restConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	client.Timeout = 10 * time.Second
	defer client.CloseIdleConnections()
	var last string
	for {
		resp, err := client.Get(s.url + "/readyz")
		if err != nil {
			last = err.Error()
		} else {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && strings.TrimSpace(string(body)) == "ok" {
				return
			}
			last = fmt.Sprintf("%d %s", resp.StatusCode, body)
		}
		select {
		case <-s.exited:
			t.Fatalf("crdserver exited before /readyz was ok (%v); its log:\n%s", s.waitErr, s.log)
		case <-deadline:
			s.kill()
			t.Fatalf("/readyz never answered ok; last answer: %s; crdserver's log:\n%s", last, s.log)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (s *server) running() bool {
	if s.exited == nil {
		return false
	}
	select {
	case <-s.exited:
		return false
	default:
		return true
	}
}

// stop sends SIGTERM and checks that crdserver exits with status 0.
func (s *server) stop(t *testing.T) {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM to crdserver: %v", err)
	}
	select {
	case <-s.exited:
	case <-time.After(stopTimeout):
		s.kill()
		t.Fatalf("crdserver did not exit within %v of SIGTERM; its log:\n%s", stopTimeout, s.log)
	}
	if s.waitErr != nil {
		t.Fatalf("crdserver did not exit cleanly after SIGTERM: %v; its log:\n%s", s.waitErr, s.log)
	}
}

func (s *server) kill() {
	_ = s.cmd.Process.Kill()
	<-s.exited
}

// restConfig is the client configuration from the admin.kubeconfig that
// crdserver wrote.
func (s *server) restConfig(t *testing.T) *rest.Config {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", s.kubeconfig)
	if err != nil {
		t.Fatalf("load %s: %v", s.kubeconfig, err)
	}
	return cfg
}

// kubectl runs the kubectl built by TestMain against one server, with a
// discovery cache of its own so that nothing leaks between tests or runs.
// Its methods take the (sub)test that runs the command, and fail it with the
// command's output when the command does not do what the test expects.
type kubectl struct {
	srv      *server
	cacheDir string
	env      []string
}

func newKubectl(t *testing.T, srv *server) *kubectl {
	t.Helper()
	home := t.TempDir()
	// No user preferences (kuberc), no ~/.kube, no $KUBECONFIG.
	env := []string{"HOME=" + home, "KUBERC=off"}
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k != "HOME" && k != "KUBECONFIG" && k != "KUBERC" {
			env = append(env, kv)
		}
	}
	return &kubectl{srv: srv, cacheDir: filepath.Join(home, "kube-cache"), env: env}
}

// result is what one kubectl command did.
type result struct {
	cmdline        string
	stdout, stderr string
	err            error
}

func (r result) String() string {
	return fmt.Sprintf("$ %s\n--- stdout:\n%s--- stderr:\n%s--- exit: %v", r.cmdline, r.stdout, r.stderr, r.err)
}

func (k *kubectl) command(ctx context.Context, stdin string, args []string) *exec.Cmd {
	full := append([]string{"--kubeconfig", k.srv.kubeconfig, "--cache-dir", k.cacheDir}, args...)
	cmd := exec.CommandContext(ctx, kubectlBin, full...)
	cmd.Env = k.env
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	return cmd
}

// exec runs one kubectl command to its end, with stdin if it is not empty.
func (k *kubectl) exec(stdin string, args ...string) result {
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	cmd := k.command(ctx, stdin, args)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("killed after %v: %w", commandTimeout, err)
	}
	return result{cmdline: "kubectl " + shellQuote(args), stdout: stdout.String(), stderr: stderr.String(), err: err}
}

// run runs kubectl, fails the test unless it succeeds, and returns stdout.
func (k *kubectl) run(t *testing.T, args ...string) string {
	t.Helper()
	return k.runStdin(t, "", args...)
}

// runStdin is run with a manifest on standard input (for `-f -`).
func (k *kubectl) runStdin(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	r := k.exec(stdin, args...)
	if r.err != nil {
		t.Fatalf("kubectl failed:\n%s", r)
	}
	return r.stdout
}

// fail runs kubectl, fails the test unless kubectl fails, and returns
// stderr.
func (k *kubectl) fail(t *testing.T, args ...string) string {
	t.Helper()
	r := k.exec("", args...)
	if r.err == nil {
		t.Fatalf("kubectl succeeded, but it should have failed:\n%s", r)
	}
	return r.stderr
}

// background starts a long-running kubectl command (such as a watch); the
// test reads its output as it comes. It is killed when the test ends, or
// by stop.
func (k *kubectl) background(t *testing.T, args ...string) *bgKubectl {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := k.command(ctx, "", args)
	b := &bgKubectl{cmdline: "kubectl " + shellQuote(args), cancel: cancel, stdout: &syncBuffer{}, stderr: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = b.stdout, b.stderr
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("start %s: %v", b.cmdline, err)
	}
	go func() {
		b.err = cmd.Wait()
		close(b.done)
	}()
	t.Cleanup(b.stop)
	return b
}

type bgKubectl struct {
	cmdline        string
	cancel         context.CancelFunc
	stdout, stderr *syncBuffer
	done           chan struct{}
	err            error
}

func (b *bgKubectl) String() string {
	return fmt.Sprintf("$ %s\n--- stdout so far:\n%s--- stderr so far:\n%s", b.cmdline, b.stdout, b.stderr)
}

// waitForLine waits until a line of stdout matches re, and returns all
// stdout lines so far.
func (b *bgKubectl) waitForLine(t *testing.T, re *regexp.Regexp) []string {
	t.Helper()
	deadline := time.After(eventTimeout)
	for {
		lines := strings.Split(b.stdout.String(), "\n")
		for _, l := range lines {
			if re.MatchString(l) {
				return lines
			}
		}
		select {
		case <-b.done:
			t.Fatalf("kubectl exited (%v) before printing a line matching %q:\n%s", b.err, re, b)
		case <-deadline:
			t.Fatalf("kubectl printed no line matching %q within %v:\n%s", re, eventTimeout, b)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// stop ends the command (it is killed: a watch never ends by itself).
func (b *bgKubectl) stop() {
	b.cancel()
	<-b.done
}

// syncBuffer is a bytes.Buffer that a process can write to while the test
// reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func shellQuote(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\n'\"*$!?{}[]()<>|&;\\") {
			q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		} else {
			q[i] = a
		}
	}
	return strings.Join(q, " ")
}

// tableRow finds the row of kubectl's table output whose first column is
// name, and returns its columns (split on runs of spaces).
func tableRow(t *testing.T, out, name string) []string {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == name {
			return f
		}
	}
	t.Fatalf("no row for %q in kubectl's output:\n%s", name, out)
	return nil
}

// tableHeader returns the column names of kubectl's table output, joined
// by single spaces ("NAME AGE").
func tableHeader(t *testing.T, out string) string {
	t.Helper()
	l := lines(out)
	if len(l) == 0 {
		t.Fatalf("kubectl printed no table")
	}
	return strings.Join(strings.Fields(l[0]), " ")
}

// lines splits output into its non-empty lines.
func lines(out string) []string {
	var l []string
	for _, s := range strings.Split(out, "\n") {
		if strings.TrimSpace(s) != "" {
			l = append(l, s)
		}
	}
	return l
}
