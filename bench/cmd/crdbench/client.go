package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// tlsFlags are the client's TLS settings, the same flags in every subcommand.
type tlsFlags struct {
	cacert, cert, key string
	insecure, http1   bool
}

func (t *tlsFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&t.cacert, "cacert", "", "CA bundle to verify an https server")
	fs.StringVar(&t.cert, "cert", "", "client certificate (empty: no client certificate)")
	fs.StringVar(&t.key, "key", "", "client key")
	fs.BoolVar(&t.insecure, "insecure", false, "skip TLS verification")
	fs.BoolVar(&t.http1, "http1", false, "use HTTP/1.1 even over TLS (plain http is always HTTP/1.1)")
}

// checkLoopback refuses any URL whose host is not a loopback address.
func checkLoopback(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("%q: scheme must be http or https", raw)
	}
	host := u.Hostname()
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("%q: crdbench only talks to loopback addresses (127.0.0.1, ::1)", raw)
	}
	return u, nil
}

// newClient returns an HTTP client for u. Plain http gets HTTP/1.1 with
// keep-alive; https gets HTTP/2 unless http1 is set. Every HTTP client of
// crdbench is built here.
func newClient(u *url.URL, t tlsFlags, conns int) (*http.Client, error) {
	tr := &http.Transport{
		MaxIdleConns:        conns + 4,
		MaxIdleConnsPerHost: conns + 4,
		IdleConnTimeout:     90 * time.Second,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
	}
	if u.Scheme == "https" {
		cfg := &tls.Config{InsecureSkipVerify: t.insecure}
		if t.cacert != "" {
			pem, err := os.ReadFile(t.cacert)
			if err != nil {
				return nil, err
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("no certificates in %s", t.cacert)
			}
			cfg.RootCAs = pool
		} else if !t.insecure {
			return nil, fmt.Errorf("https needs -cacert or -insecure")
		}
		if t.cert != "" {
			c, err := tls.LoadX509KeyPair(t.cert, t.key)
			if err != nil {
				return nil, err
			}
			cfg.Certificates = []tls.Certificate{c}
		}
		tr.TLSClientConfig = cfg
		if t.http1 {
			tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
		} else {
			tr.ForceAttemptHTTP2 = true
		}
	}
	return &http.Client{Transport: tr, Timeout: 60 * time.Second}, nil
}

// client is how every workload talks to the server: one HTTP client for
// the server's base URL, JSON in and out.
type client struct {
	hc    *http.Client
	base  string
	u     *url.URL
	tls   tlsFlags
	proto atomic.Value // the protocol of the last answer (HTTP/2.0, HTTP/1.1)
}

// connect checks that server is a loopback URL and builds its client, with
// idle connections for conns workers.
func connect(server string, t tlsFlags, conns int) (*client, error) {
	u, err := checkLoopback(server)
	if err != nil {
		return nil, err
	}
	hc, err := newClient(u, t, conns)
	if err != nil {
		return nil, err
	}
	return &client{hc: hc, base: strings.TrimRight(server, "/"), u: u, tls: t}, nil
}

// protocol is the protocol of the server's last answer.
func (c *client) protocol() string {
	p, _ := c.proto.Load().(string)
	return p
}

// send sends one request, bounded by ctx, with Accept: application/json (a
// JSON body is sent as such); hdr are header name, value pairs that add to
// or replace these. The caller closes the answer's body.
func (c *client) send(ctx context.Context, method, url string, body []byte, hdr ...string) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "crdbench")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.hc.Do(req)
	if err == nil {
		c.proto.Store(resp.Proto)
	}
	return resp, err
}

// do sends one request and reads the whole answer.
func (c *client) do(ctx context.Context, method, url string, body []byte, hdr ...string) (int, []byte, error) {
	code, b, _, err := c.call(ctx, method, url, body, hdr...)
	return code, b, err
}

// call is do that also returns the answer's header.
func (c *client) call(ctx context.Context, method, url string, body []byte, hdr ...string) (int, []byte, http.Header, error) {
	resp, err := c.send(ctx, method, url, body, hdr...)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, resp.Header, err
}

// get is an unbounded GET with the Accept given, timed from sending until
// the answer is read.
func (c *client) get(url, accept string) (int, []byte, time.Duration, error) {
	t := time.Now()
	code, b, err := c.do(context.Background(), http.MethodGet, url, nil, "Accept", accept)
	return code, b, time.Since(t), err
}

// getJSON GETs url with the Accept given, bounded by ctx and 10 s, and
// decodes a 200 into v.
func (c *client) getJSON(ctx context.Context, url, accept string, v any) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	code, b, err := c.do(ctx, http.MethodGet, url, nil, "Accept", accept)
	if err != nil || code != http.StatusOK {
		return code, err
	}
	return code, json.Unmarshal(b, v)
}

// fail is the failure of one request, as the server answered it.
func (c *client) fail(phaseName, method, url string, code int, b []byte, err error) *failure {
	f := &failure{Phase: phaseName, Method: method, Path: strings.TrimPrefix(url, c.base), Status: code, Body: truncate(b, 2000)}
	if err != nil {
		f.Error = err.Error()
	}
	return f
}

// create POSTs a new object (what, in messages) to coll within 30 s and
// wants a 201. An object that exists already could be someone else's: it is
// left alone, and the error says so.
func (c *client) create(ctx context.Context, phaseName, what, coll string, body []byte) (*failure, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	code, b, err := c.do(ctx, http.MethodPost, coll, body)
	if err == nil && code == http.StatusCreated {
		return nil, nil
	}
	f := c.fail(phaseName, http.MethodPost, coll, code, b, err)
	if code == http.StatusConflict {
		return f, fmt.Errorf("%s already exists: not touching it", what)
	}
	return f, fmt.Errorf("could not create %s (HTTP %d)", what, code)
}

// namespaceBody is a Namespace labelled bench=crdbench.
func namespaceBody(ns string) []byte {
	b, _ := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]any{"name": ns, "labels": map[string]string{"bench": "crdbench"}}})
	return b
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// getGzip GETs url as client-go does, with Accept-Encoding: gzip (Go's
// transport adds it to every request itself and decompresses the answer
// while it is read; here it is asked for explicitly so that the bytes on
// the wire can be counted). It returns the status, the decompressed body,
// the body's size as sent and its Content-Encoding.
func (c *client) getGzip(ctx context.Context, url string) (code int, body []byte, wire int, enc string, err error) {
	resp, err := c.send(ctx, http.MethodGet, url, nil, "Accept-Encoding", "gzip")
	if err != nil {
		return 0, nil, 0, "", err
	}
	defer resp.Body.Close()
	enc = resp.Header.Get("Content-Encoding")
	cr := &countingReader{r: resp.Body}
	var rd io.Reader = cr
	if enc == "gzip" {
		zr, zerr := gzip.NewReader(cr)
		if zerr != nil {
			return resp.StatusCode, nil, cr.n, enc, zerr
		}
		rd = zr
	}
	body, err = io.ReadAll(rd)
	if err == nil {
		_, err = io.Copy(io.Discard, cr) // anything after the gzip stream
	}
	return resp.StatusCode, body, cr.n, enc, err
}

const crdPath = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"

// getCRD GETs a CRD as decoded JSON.
func (c *client) getCRD(ctx context.Context, name string) (map[string]any, int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	code, b, err := c.do(ctx, http.MethodGet, c.base+crdPath+"/"+name, nil)
	if err != nil || code != http.StatusOK {
		return nil, code, b, err
	}
	var crd map[string]any
	if err := json.Unmarshal(b, &crd); err != nil {
		return nil, code, b, err
	}
	return crd, code, b, nil
}

// waitCRD polls a CRD every interval until cond holds, within timeout; it
// returns the time from t0 and the polls made.
func (c *client) waitCRD(ctx context.Context, name string, t0 time.Time, timeout, interval time.Duration, cond func(map[string]any) bool) (time.Duration, int, error) {
	var last string
	polls, met := 0, false
	pollUntil(timeout, interval, func() bool {
		polls++
		crd, code, b, err := c.getCRD(ctx, name)
		switch {
		case err != nil:
			last = err.Error()
		case crd == nil:
			last = fmt.Sprintf("HTTP %d %s", code, truncate(b, 300))
		case cond(crd):
			met = true
		default:
			st, _ := json.Marshal(crd["status"])
			last = "status " + truncate(st, 500)
		}
		return met || ctx.Err() != nil
	})
	if !met {
		return time.Since(t0), 0, fmt.Errorf("CRD %s: condition not met within %v; last: %s", name, timeout, last)
	}
	return time.Since(t0), polls, nil
}

// waitEstablished polls a CRD every 20 ms until it is Established.
func (c *client) waitEstablished(ctx context.Context, name string, timeout time.Duration) error {
	_, _, err := c.waitCRD(ctx, name, time.Now(), timeout, 20*time.Millisecond, crdEstablished)
	return err
}

// crdEstablished reports whether a CRD (decoded JSON) is Established.
func crdEstablished(crd map[string]any) bool {
	conds, _ := jsonPath(crd, "status", "conditions").([]any)
	return slices.ContainsFunc(conds, func(c any) bool { return jsonPath(c, "type") == "Established" && jsonPath(c, "status") == "True" })
}

// deleteAndWait DELETEs url and polls it every 250 ms until it answers 404,
// within wait; it says what happened.
func (c *client) deleteAndWait(what, url string, wait time.Duration) string {
	ctx, cancel := context.WithTimeout(context.Background(), wait+10*time.Second)
	defer cancel()
	t0 := time.Now()
	code, b, err := c.do(ctx, http.MethodDelete, url, nil)
	if err != nil || (code != http.StatusOK && code != http.StatusAccepted && code != http.StatusNotFound) {
		return fmt.Sprintf("DELETE %s: HTTP %d %v %s", what, code, err, truncate(b, 300))
	}
	if pollUntil(wait, 250*time.Millisecond, func() bool {
		code, _, err := c.do(ctx, http.MethodGet, url, nil)
		return err == nil && code == http.StatusNotFound
	}) {
		return fmt.Sprintf("%s deleted, gone after %.1f s", what, time.Since(t0).Seconds())
	}
	return fmt.Sprintf("%s deleted, still there after %v", what, wait)
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// truncate keeps error bodies readable in reports.
func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}

// getOK is get that wants a 200: any other answer is an error naming what.
func (c *client) getOK(what, url, accept string) ([]byte, time.Duration, error) {
	code, b, d, err := c.get(url, accept)
	if err != nil || code != http.StatusOK {
		return b, d, fmt.Errorf("%s: HTTP %d %v %s", what, code, err, truncate(b, 300))
	}
	return b, d, nil
}

// expect sends one request (unbounded) and wants one of the codes: any
// other answer is a failure of phaseName.
func (c *client) expect(phaseName, method, url string, body []byte, codes ...int) *failure {
	code, b, err := c.do(context.Background(), method, url, body)
	if err != nil || !slices.Contains(codes, code) {
		return c.fail(phaseName, method, url, code, b, err)
	}
	return nil
}
