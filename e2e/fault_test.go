package e2e

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
)

// Bounds against hanging on a raw connection. crdserver's own limits are
// ReadHeaderTimeout 30 s (which also bounds the TLS handshake) and
// IdleTimeout 90 s; no test asserts how long anything takes.
const (
	rawIOTimeout = time.Minute            // one raw exchange
	cutOffBound  = 2 * time.Minute        // a slow or idle client being cut off
	dribbleEvery = 100 * time.Millisecond // the slowloris client's pace
	normalCount  = 20                     // requests of a normal client while a bad one misbehaves
	cronTabsPath = "/apis/stable.example.com/v1/namespaces/default/crontabs"
)

// TestNetworkFaults talks to crdserver over raw TLS (and plain TCP)
// connections the way broken or hostile clients do — truncated bodies, wrong
// or garbled content, enormous headers, slow headers and bodies, idle
// connections, plain HTTP on the TLS port — and checks that each gets a
// proper answer or a closed connection, that nothing half-received is
// stored, that a normal client is served all the while, and that the server
// ends ready with its data intact.
func TestNetworkFaults(t *testing.T) {
	srv := startServer(t)
	f := newFaultEnv(t, srv)

	// The slowest clients start first and misbehave during all the other
	// checks: the server cuts them off after ReadHeaderTimeout (30 s), and the
	// last subtest waits for that.
	slow := f.startSlowloris(t)
	idle := f.startIdleConns(t, 50, 50)

	t.Run("slowloris headers do not block others", func(t *testing.T) {
		// Each normal request waits for one more byte of the slow client's
		// headers: they are all served while it is in the middle of its
		// request.
		f.normalRequestsWhile(t, "slowloris", normalCount, slow)
		if slow.isClosed() {
			t.Fatalf("the slowloris connection ended before the normal requests did (after %d header bytes): %v", slow.sent.Load(), slow.err())
		}
		if got := slow.received(); len(got) > 0 {
			t.Errorf("the server answered a request whose headers never ended: %q", got)
		}
		t.Logf("%d normal requests served, one after each byte the slowloris client sent (%d bytes of headers so far)", normalCount, slow.sent.Load())
	})

	t.Run("idle connections do not block others", func(t *testing.T) {
		f.normalRequests(t, "idle", normalCount)
		open := 0
		for _, c := range idle {
			if !c.isClosed() {
				open++
			}
		}
		if open != len(idle) {
			t.Errorf("only %d of the %d idle connections were still open after the normal requests", open, len(idle))
		}
		t.Logf("%d normal requests served on new connections while %d connections sat idle", normalCount, open)
	})

	t.Run("truncated bodies", func(t *testing.T) {
		obj := f.cronTabJSON("truncated")
		cases := []struct {
			name     string
			headers  string
			body     []byte
			hardStop bool // close the connection instead of half-closing it
		}{
			{"a third of the body, half-close", fmt.Sprintf("Content-Type: application/json\r\nContent-Length: %d\r\n", len(obj)), obj[:len(obj)/3], false},
			{"a whole object but Content-Length larger, half-close", fmt.Sprintf("Content-Type: application/json\r\nContent-Length: %d\r\n", len(obj)+50), obj, false},
			{"a whole object but Content-Length larger, close", fmt.Sprintf("Content-Type: application/json\r\nContent-Length: %d\r\n", len(obj)+50), obj, true},
			{"chunked without the last chunk, half-close", "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n", fmt.Appendf(nil, "%x\r\n%s\r\n", len(obj), obj), false},
		}
		for _, c := range cases {
			conn := f.dialTLS(t)
			rc := watchConn(conn)
			if _, err := io.WriteString(conn, "POST "+cronTabsPath+" HTTP/1.1\r\nHost: "+f.host+"\r\n"+c.headers+"\r\n"); err != nil {
				t.Fatalf("%s: write headers: %v", c.name, err)
			}
			if _, err := conn.Write(c.body); err != nil {
				t.Fatalf("%s: write body: %v", c.name, err)
			}
			if c.hardStop {
				conn.Close()
				continue
			}
			if err := conn.CloseWrite(); err != nil {
				t.Fatalf("%s: half-close: %v", c.name, err)
			}
			resp, body := rc.response(t)
			switch {
			case resp == nil:
				t.Logf("%s: the server closed the connection without an answer (%v)", c.name, rc.err())
			case resp.StatusCode == http.StatusBadRequest:
				mustStatus(t, c.name, resp, body, http.StatusBadRequest, metav1.StatusReasonBadRequest)
			case resp.StatusCode == http.StatusGatewayTimeout:
				// The half-close ends the request's context (Go's server
				// reads EOF) before the handler has answered; kube-apiserver
				// answers exactly so: "Timeout: request did not complete
				// within requested timeout - context canceled".
				mustStatus(t, c.name, resp, body, http.StatusGatewayTimeout, metav1.StatusReasonTimeout)
			default:
				t.Errorf("%s: got %s, want 400, 504 or no answer; body: %s", c.name, resp.Status, body)
			}
			conn.Close()
		}
		f.mustBeReady(t)
		f.mustNotExist(t, "truncated")
	})

	t.Run("wrong Content-Type is 415", func(t *testing.T) {
		for i, ct := range []string{"text/plain", "application/x-www-form-urlencoded", "image/png", "application/vnd.kubernetes.protobuf", "application/json-patch+json"} {
			name := fmt.Sprintf("wrong-type-%d", i)
			resp, body := f.rawRequest(t, "POST", cronTabsPath, "Content-Type: "+ct+"\r\n", f.cronTabJSON(name))
			mustStatus(t, "POST as "+ct, resp, body, http.StatusUnsupportedMediaType, metav1.StatusReasonUnsupportedMediaType)
			f.mustNotExist(t, name)
		}
	})

	t.Run("a body that is not JSON is 400", func(t *testing.T) {
		for _, body := range [][]byte{
			[]byte("this is not JSON"),
			[]byte(`{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"not-json"`),
			[]byte(`[1,2,3]`),
			[]byte(`null`),
			[]byte(`"a string"`),
			{0xff, 0xfe, 0x00, 0x01, '{', 0x80},
		} {
			resp, got := f.rawRequest(t, "POST", cronTabsPath, "Content-Type: application/json\r\n", body)
			mustStatus(t, fmt.Sprintf("POST %q", body), resp, got, http.StatusBadRequest, metav1.StatusReasonBadRequest)
		}
		f.mustNotExist(t, "not-json")
	})

	t.Run("a body over 3 MiB is 413", func(t *testing.T) {
		// Declared too large: refused before the body is read.
		conn := f.dialTLS(t)
		rc := watchConn(conn)
		if _, err := fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{", cronTabsPath, f.host, 4<<20); err != nil {
			t.Fatal(err)
		}
		resp, body := rc.response(t)
		if resp == nil {
			t.Fatalf("no answer to a 4 MiB Content-Length (%v)", rc.err())
		}
		mustStatus(t, "Content-Length of 4 MiB", resp, body, http.StatusRequestEntityTooLarge, metav1.StatusReasonRequestEntityTooLarge)
		conn.Close()

		// Chunked, so the size shows only while reading; sent while a normal
		// client works.
		big := append(f.cronTabJSON("too-large")[:20:20], bytes.Repeat([]byte(" "), 4<<20)...)
		var wg sync.WaitGroup
		wg.Go(func() { f.normalRequests(t, "large-body", normalCount) })
		resp, body = f.rawRequest(t, "POST", cronTabsPath, "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n", chunked(big, 64<<10))
		wg.Wait()
		if resp == nil {
			t.Logf("a 4 MiB chunked body: the connection was closed without an answer")
		} else {
			mustStatus(t, "a 4 MiB chunked body", resp, body, http.StatusRequestEntityTooLarge, metav1.StatusReasonRequestEntityTooLarge)
		}
		f.mustNotExist(t, "too-large")
	})

	t.Run("enormous headers are 431 or a closed connection", func(t *testing.T) {
		oneHeader := "X-Huge: " + strings.Repeat("h", 2<<20) + "\r\n"
		var many strings.Builder
		for i := 0; many.Len() < 2<<20; i++ {
			fmt.Fprintf(&many, "X-Many-%d: %s\r\n", i, strings.Repeat("m", 100))
		}
		// Eight clients at once, half with one 2 MiB header, half with
		// thousands of small ones.
		var wg sync.WaitGroup
		conns := make([]*rawConn, 8)
		writeErrs := make([]error, len(conns))
		for i := range conns {
			headers := oneHeader
			if i%2 == 1 {
				headers = many.String()
			}
			conn := f.dialTLS(t)
			defer conn.Close()
			conns[i] = watchConn(conn)
			// The server stops reading at its limit (1 MiB) and closes: the
			// write may fail.
			wg.Go(func() {
				_, writeErrs[i] = io.WriteString(conn, "GET /readyz HTTP/1.1\r\nHost: "+f.host+"\r\n"+headers+"\r\n")
			})
		}
		// A normal client, meanwhile, is served.
		f.normalRequests(t, "huge-headers", normalCount)
		wg.Wait()
		for i, rc := range conns {
			resp, body := rc.response(t)
			switch {
			case resp == nil:
				t.Logf("2 MiB of headers (%d): closed without an answer (write: %v; read: %v)", i, writeErrs[i], rc.err())
			case resp.StatusCode == http.StatusRequestHeaderFieldsTooLarge:
				t.Logf("2 MiB of headers (%d): %s", i, resp.Status)
			default:
				t.Errorf("2 MiB of headers (%d): got %s, want 431 or a closed connection; body: %.200s", i, resp.Status, body)
			}
		}
		f.mustBeReady(t)
	})

	t.Run("a slow body upload does not block others", func(t *testing.T) {
		name := "slow-body"
		obj := f.cronTabJSON(name)
		conn := f.dialTLS(t)
		defer conn.Close()
		rc := watchConn(conn)
		if _, err := fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n", cronTabsPath, f.host, len(obj)); err != nil {
			t.Fatal(err)
		}
		// Dribble the body while normal clients create, read and list
		// CronTabs in the same namespace, one request after each byte.
		stop := make(chan struct{})
		var dribbler sync.WaitGroup
		dribbler.Go(func() {
			tick := time.NewTicker(dribbleEvery / 4)
			defer tick.Stop()
			for n := 0; n < len(obj)-1; n++ {
				select {
				case <-stop:
					return
				case <-rc.closed:
					return
				case <-tick.C:
				}
				if _, err := conn.Write(obj[n : n+1]); err != nil {
					rc.setErr(fmt.Errorf("write: %w", err))
					return
				}
				rc.sent.Add(1)
			}
		})
		f.normalRequestsWhile(t, "slow-body", normalCount, rc)
		f.listCronTabs(t)
		close(stop)
		dribbler.Wait()
		sent := rc.sent.Load()
		if rc.isClosed() || len(rc.received()) > 0 {
			t.Fatalf("the slow upload ended before its body did (after %d of %d bytes): %q, %v", sent, len(obj), rc.received(), rc.err())
		}
		t.Logf("%d normal requests served, one after each byte of the slow upload's body (%d of %d bytes sent)", normalCount, sent, len(obj))
		// Then the rest of the body at once: the object is created whole.
		if _, err := conn.Write(obj[sent:]); err != nil {
			t.Fatalf("write the rest of the body: %v", err)
		}
		resp, body := rc.response(t)
		if resp == nil || resp.StatusCode != http.StatusCreated {
			t.Fatalf("the slow upload: got %v (%v), want 201; body: %s", resp, rc.err(), body)
		}
		f.addExpected(name)
	})

	t.Run("plain HTTP on the TLS port", func(t *testing.T) {
		for _, req := range []string{
			"GET /readyz HTTP/1.1\r\nHost: " + f.host + "\r\n\r\n",
			fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", cronTabsPath, f.host, len(f.cronTabJSON("plain-http")), f.cronTabJSON("plain-http")),
		} {
			conn := f.dialTCP(t)
			rc := watchConn(conn)
			if _, err := io.WriteString(conn, req); err != nil {
				t.Fatal(err)
			}
			resp, body := rc.response(t)
			if resp == nil {
				t.Logf("plain HTTP: closed without an answer (%v)", rc.err())
			} else if resp.StatusCode != http.StatusBadRequest {
				t.Errorf("plain HTTP %q: got %s, want 400; body: %s", strings.SplitN(req, "\r\n", 2)[0], resp.Status, body)
			} else {
				t.Logf("plain HTTP: %s %q", resp.Status, strings.TrimSpace(string(body)))
			}
			conn.Close()
		}
		f.mustNotExist(t, "plain-http")

		// Bytes that are neither TLS nor HTTP: the connection is closed.
		conn := f.dialTCP(t)
		defer conn.Close()
		rc := watchConn(conn)
		garbage := make([]byte, 4096)
		rng := rand.New(rand.NewPCG(1, 2))
		for i := range garbage {
			garbage[i] = byte(rng.IntN(256))
		}
		_, _ = conn.Write(garbage)
		rc.waitClosed(t, rawIOTimeout, "a connection that sent 4 KiB of garbage")
		f.mustBeReady(t)
	})

	t.Run("slow and idle clients are cut off", func(t *testing.T) {
		// ReadHeaderTimeout (30 s, counted from the start of each
		// connection) ends them; this waits for that without timing it.
		slow.waitClosed(t, cutOffBound, "the slowloris connection")
		if got := slow.received(); len(got) > 0 {
			t.Errorf("the server answered the slowloris client's unfinished headers: %q", got)
		}
		t.Logf("the slowloris connection was closed by the server after %d header bytes (%v)", slow.sent.Load(), slow.err())
		for _, c := range idle {
			c.waitClosed(t, cutOffBound, "an idle connection")
		}
		t.Logf("the %d idle connections were closed by the server", len(idle))
	})

	f.mustBeReady(t)
	f.mustBeIntact(t)
	checkNoPanic(t, srv, "after the network faults")
}

// faultEnv is one server with the CronTab CRD, a few CronTabs that must
// stay as they are, and the means to talk to it raw.
type faultEnv struct {
	srv    *server
	host   string // 127.0.0.1:port
	tlsCfg *tls.Config
	normal *http.Client // a new connection for every request

	mu       sync.Mutex
	baseline map[string]*unstructured.Unstructured
	expected map[string]bool // every CronTab that must exist at the end
}

func newFaultEnv(t *testing.T, srv *server) *faultEnv {
	t.Helper()
	cfg := srv.restConfig(t)
	u, err := url.Parse(srv.url)
	if err != nil {
		t.Fatal(err)
	}
	if ip := net.ParseIP(u.Hostname()); ip == nil || !ip.IsLoopback() {
		t.Fatalf("the server is not on a loopback address: %s", srv.url)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(cfg.CAData) {
		t.Fatalf("no CA certificate in %s", srv.kubeconfig)
	}
	cert, err := tls.X509KeyPair(cfg.CertData, cfg.KeyData)
	if err != nil {
		t.Fatalf("the admin client certificate in %s: %v", srv.kubeconfig, err)
	}
	tlsCfg := &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, ServerName: u.Hostname(), NextProtos: []string{"http/1.1"}, MinVersion: tls.VersionTLS12}
	f := &faultEnv{
		srv:    srv,
		host:   u.Host,
		tlsCfg: tlsCfg,
		normal: &http.Client{
			Transport: &http.Transport{TLSClientConfig: tlsCfg.Clone(), DisableKeepAlives: true},
			Timeout:   rawIOTimeout,
		},
		baseline: map[string]*unstructured.Unstructured{},
		expected: map[string]bool{},
	}
	t.Cleanup(f.normal.CloseIdleConnections)

	crds := newCRDClient(t, cfg)
	if _, err := crds.Create(t.Context(), readCRD(t), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create CRD: %v", err)
	}
	waitEstablished(t, cfg)
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		name := fmt.Sprintf("intact-%d", i)
		var obj unstructured.Unstructured
		if err := obj.UnmarshalJSON(f.cronTabJSON(name)); err != nil {
			t.Fatal(err)
		}
		created, err := dyn.Resource(cronTabs).Namespace("default").Create(t.Context(), &obj, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
		f.baseline[name] = created
		f.expected[name] = true
	}
	return f
}

// cronTabJSON is a CronTab whose spec.image tells its name.
func (f *faultEnv) cronTabJSON(name string) []byte {
	b, _ := json.Marshal(map[string]any{
		"apiVersion": "stable.example.com/v1",
		"kind":       "CronTab",
		"metadata":   map[string]any{"name": name, "labels": map[string]any{"fault": "test"}},
		"spec":       map[string]any{"cronSpec": "*/5 * * * *", "image": "image-of-" + name, "replicas": 3},
	})
	return b
}

func (f *faultEnv) addExpected(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.expected[name] = true
}

func (f *faultEnv) dialTCP(t *testing.T) net.Conn {
	t.Helper()
	conn, err := (&net.Dialer{Timeout: rawIOTimeout}).Dial("tcp", f.host)
	if err != nil {
		t.Fatalf("dial %s: %v", f.host, err)
	}
	_ = conn.SetDeadline(time.Now().Add(cutOffBound + rawIOTimeout))
	return conn
}

// dialTLS is a TLS connection with the admin client certificate, its
// handshake done, speaking HTTP/1.1.
func (f *faultEnv) dialTLS(t *testing.T) *tls.Conn {
	t.Helper()
	conn := tls.Client(f.dialTCP(t), f.tlsCfg)
	if err := conn.Handshake(); err != nil {
		conn.Close()
		t.Fatalf("TLS handshake with %s: %v", f.host, err)
	}
	return conn
}

// rawRequest sends one request on a new TLS connection and reads the
// answer (nil if the server closed the connection without one).
func (f *faultEnv) rawRequest(t *testing.T, method, path, headers string, body []byte) (*http.Response, []byte) {
	t.Helper()
	conn := f.dialTLS(t)
	defer conn.Close()
	rc := watchConn(conn)
	length := fmt.Sprintf("Content-Length: %d\r\n", len(body))
	if strings.Contains(headers, "Transfer-Encoding:") {
		length = ""
	}
	msg := append([]byte(fmt.Sprintf("%s %s HTTP/1.1\r\nHost: %s\r\n%s%sConnection: close\r\n\r\n", method, path, f.host, headers, length)), body...)
	_, werr := conn.Write(msg)
	resp, got := rc.response(t)
	if resp == nil && werr != nil {
		t.Logf("%s %s: write: %v", method, path, werr)
	}
	return resp, got
}

// normalRequests is a well-behaved client: n requests, each on a new
// connection — readiness, reading a CronTab, creating one — all of which
// must succeed.
func (f *faultEnv) normalRequests(t *testing.T, tag string, n int) {
	t.Helper()
	for i := range n {
		f.normalRequest(t, tag, i)
	}
}

// normalRequestsWhile makes n normal requests, each after the slow client
// on rc has sent one more byte; it fails if rc's connection ends first.
func (f *faultEnv) normalRequestsWhile(t *testing.T, tag string, n int, rc *rawConn) {
	t.Helper()
	start := rc.sent.Load()
	for i := range n {
		deadline := time.After(rawIOTimeout)
		for rc.sent.Load() <= start+int64(i) {
			select {
			case <-rc.closed:
				t.Fatalf("the slow client's connection ended after %d normal requests (%d bytes sent): %v", i, rc.sent.Load(), rc.err())
			case <-deadline:
				t.Fatalf("the slow client sent nothing for %v (%v)", rawIOTimeout, rc.err())
			case <-time.After(dribbleEvery / 20):
			}
		}
		f.normalRequest(t, tag, i)
	}
}

func (f *faultEnv) normalRequest(t *testing.T, tag string, i int) {
	t.Helper()
	switch i % 3 {
	case 0:
		code, body, err := f.do("GET", "/readyz", nil)
		if err != nil || code != http.StatusOK || strings.TrimSpace(string(body)) != "ok" {
			t.Errorf("normal client (%s): GET /readyz: %d %q %v", tag, code, body, err)
		}
	case 1:
		name := fmt.Sprintf("intact-%d", i%10)
		code, body, err := f.do("GET", cronTabsPath+"/"+name, nil)
		if err != nil || code != http.StatusOK || !bytes.Contains(body, []byte(`"image-of-`+name+`"`)) {
			t.Errorf("normal client (%s): GET %s: %d %.300s %v", tag, name, code, body, err)
		}
	case 2:
		name := fmt.Sprintf("normal-%s-%d", tag, i)
		code, body, err := f.do("POST", cronTabsPath, f.cronTabJSON(name))
		if err != nil || code != http.StatusCreated {
			t.Errorf("normal client (%s): create %s: %d %.300s %v", tag, name, code, body, err)
			return
		}
		f.addExpected(name)
	}
}

func (f *faultEnv) do(method, path string, body []byte) (int, []byte, error) {
	req, err := http.NewRequest(method, "https://"+f.host+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := f.normal.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	return resp.StatusCode, got, err
}

func (f *faultEnv) mustBeReady(t *testing.T) {
	t.Helper()
	if !f.srv.running() {
		t.Fatalf("crdserver exited (%v); its log:\n%s", f.srv.waitErr, f.srv.log)
	}
	code, body, err := f.do("GET", "/readyz", nil)
	if err != nil || code != http.StatusOK || strings.TrimSpace(string(body)) != "ok" {
		t.Fatalf("GET /readyz: %d %q %v; crdserver's log:\n%s", code, body, err, f.srv.log)
	}
}

func (f *faultEnv) mustNotExist(t *testing.T, name string) {
	t.Helper()
	code, body, err := f.do("GET", cronTabsPath+"/"+name, nil)
	if err != nil || code != http.StatusNotFound {
		t.Errorf("GET %s after a request that must not have stored it: %d %.300s %v", name, code, body, err)
	}
}

// listCronTabs lists the CronTabs in default.
func (f *faultEnv) listCronTabs(t *testing.T) []unstructured.Unstructured {
	t.Helper()
	code, body, err := f.do("GET", cronTabsPath, nil)
	if err != nil || code != http.StatusOK {
		t.Fatalf("list CronTabs: %d %.300s %v", code, body, err)
	}
	var list unstructured.UnstructuredList
	if err := list.UnmarshalJSON(body); err != nil {
		t.Fatalf("list CronTabs: %v: %.300s", err, body)
	}
	return list.Items
}

// mustBeIntact checks that the CronTabs are exactly the ones made on
// purpose: the baseline ones untouched, the others whole.
func (f *faultEnv) mustBeIntact(t *testing.T) {
	t.Helper()
	items := f.listCronTabs(t)
	f.mu.Lock()
	defer f.mu.Unlock()
	var got, want []string
	for name := range f.expected {
		want = append(want, name)
	}
	for _, it := range items {
		name := it.GetName()
		got = append(got, name)
		if img := nestedString(&it, "spec", "image"); img != "image-of-"+name {
			t.Errorf("%s has spec.image %q, want %q", name, img, "image-of-"+name)
		}
		if b := f.baseline[name]; b != nil && (it.GetResourceVersion() != b.GetResourceVersion() || it.GetUID() != b.GetUID()) {
			t.Errorf("%s changed: uid %s resourceVersion %s, was %s %s", name, it.GetUID(), it.GetResourceVersion(), b.GetUID(), b.GetResourceVersion())
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("CronTabs at the end:\n got: %q\nwant: %q", got, want)
	}
	t.Logf("%d CronTabs intact at the end", len(items))
}

// startSlowloris opens a connection that sends a request's headers one
// byte at a time and never finishes them.
func (f *faultEnv) startSlowloris(t *testing.T) *rawConn {
	t.Helper()
	conn := f.dialTLS(t)
	rc := watchConn(conn)
	if _, err := io.WriteString(conn, "GET /readyz HTTP/1.1\r\nHost: "+f.host+"\r\nX-Slow: "); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(dribbleEvery)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-rc.closed:
				return
			case <-tick.C:
			}
			if _, err := conn.Write([]byte{'z'}); err != nil {
				rc.setErr(fmt.Errorf("write: %w", err))
				return
			}
			rc.sent.Add(1)
		}
	})
	t.Cleanup(func() {
		close(done)
		wg.Wait()
		conn.Close()
	})
	return rc
}

// startIdleConns opens connections that do nothing: some plain TCP (no TLS
// handshake), some TLS with the handshake done but no request.
func (f *faultEnv) startIdleConns(t *testing.T, tcp, withTLS int) []*rawConn {
	t.Helper()
	var conns []*rawConn
	for i := range tcp + withTLS {
		var c net.Conn
		if i < tcp {
			c = f.dialTCP(t)
		} else {
			c = f.dialTLS(t)
		}
		t.Cleanup(func() { c.Close() })
		conns = append(conns, watchConn(c))
	}
	return conns
}

// rawConn reads whatever the server sends on a connection until it ends.
type rawConn struct {
	closed chan struct{} // closed when a read fails (the server closed, or the test did)
	sent   atomic.Int64  // bytes a dribbler sent

	mu      sync.Mutex
	got     bytes.Buffer
	readErr error
}

func watchConn(conn net.Conn) *rawConn {
	rc := &rawConn{closed: make(chan struct{})}
	go func() {
		buf := make([]byte, 32<<10)
		for {
			n, err := conn.Read(buf)
			rc.mu.Lock()
			rc.got.Write(buf[:n])
			if err != nil {
				if rc.readErr == nil {
					rc.readErr = err
				}
				rc.mu.Unlock()
				close(rc.closed)
				return
			}
			rc.mu.Unlock()
		}
	}()
	return rc
}

func (rc *rawConn) isClosed() bool {
	select {
	case <-rc.closed:
		return true
	default:
		return false
	}
}

func (rc *rawConn) received() []byte {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return bytes.Clone(rc.got.Bytes())
}

func (rc *rawConn) err() error {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.readErr
}

func (rc *rawConn) setErr(err error) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.readErr == nil {
		rc.readErr = err
	}
}

func (rc *rawConn) waitClosed(t *testing.T, bound time.Duration, what string) {
	t.Helper()
	select {
	case <-rc.closed:
	case <-time.After(bound):
		t.Fatalf("%s was not closed by the server within %v", what, bound)
	}
}

// response waits until the server has answered and closed, and parses the
// answer; nil if it sent none.
func (rc *rawConn) response(t *testing.T) (*http.Response, []byte) {
	t.Helper()
	rc.waitClosed(t, rawIOTimeout, "a connection that got its answer")
	got := rc.received()
	if len(got) == 0 {
		return nil, nil
	}
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(got)), nil)
	if err != nil {
		t.Fatalf("the server sent something that is not an HTTP response: %v: %q", err, got)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Logf("reading the response body: %v", err)
	}
	return resp, body
}

// mustStatus checks that an answer is a Kubernetes Status of code and
// reason.
func mustStatus(t *testing.T, what string, resp *http.Response, body []byte, code int, reason metav1.StatusReason) {
	t.Helper()
	if resp == nil {
		t.Errorf("%s: no answer, want %d", what, code)
		return
	}
	if resp.StatusCode != code {
		t.Errorf("%s: got %s, want %d; body: %.300s", what, resp.Status, code, body)
		return
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("%s: Content-Type %q, want application/json; body: %.300s", what, ct, body)
	}
	var st metav1.Status
	if err := json.Unmarshal(body, &st); err != nil {
		t.Errorf("%s: the body is not a Status: %v: %.300s", what, err, body)
		return
	}
	if st.Kind != "Status" || st.APIVersion != "v1" || st.Status != metav1.StatusFailure || st.Code != int32(code) || st.Reason != reason {
		t.Errorf("%s: got Status kind %q apiVersion %q status %q code %d reason %q, want Status v1 Failure %d %q; message %q",
			what, st.Kind, st.APIVersion, st.Status, st.Code, st.Reason, code, reason, st.Message)
	}
}

// chunked encodes body in chunks of size n, with the last chunk.
func chunked(body []byte, n int) []byte {
	var b bytes.Buffer
	for len(body) > 0 {
		c := body[:min(n, len(body))]
		body = body[len(c):]
		fmt.Fprintf(&b, "%x\r\n%s\r\n", len(c), c)
	}
	b.WriteString("0\r\n\r\n")
	return b.Bytes()
}

// checkNoPanic fails the test if crdserver logged a panic.
func checkNoPanic(t *testing.T, srv *server, when string) {
	t.Helper()
	if log := srv.log.String(); strings.Contains(log, "panic") {
		t.Errorf("%s: crdserver logged a panic:\n%s", when, log)
	}
}
