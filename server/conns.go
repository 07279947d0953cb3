package server

import (
	"net"
	"net/http"
	"sync"
)

// connTracker follows the server's connections and their states, so that
// Close can end idle ones at once: HTTP/2 connections a client keeps open
// between requests would otherwise hold a graceful shutdown for the
// GOAWAY timeout (a second) each.
type connTracker struct {
	mu    sync.Mutex
	conns map[net.Conn]http.ConnState
}

// track is the http.Server's ConnState hook.
func (t *connTracker) track(c net.Conn, st http.ConnState) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch st {
	case http.StateClosed, http.StateHijacked:
		delete(t.conns, c)
	default:
		if t.conns == nil {
			t.conns = map[net.Conn]http.ConnState{}
		}
		t.conns[c] = st
	}
}

// closeIdle closes the connections with no request in flight (new ones
// that have sent nothing yet, and idle ones) and says how many are left.
func (t *connTracker) closeIdle() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	for c, st := range t.conns {
		if st == http.StateIdle || st == http.StateNew {
			_ = c.Close()
			delete(t.conns, c)
		}
	}
	return len(t.conns)
}
