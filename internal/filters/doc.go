// Package filters holds the HTTP filters every request passes, outermost
// first: WithRecovery (a panic becomes a 500 Status), WithRequestInfo
// (parses what the request asks for), WithMetrics (apiserver_request_total
// and request durations), then the authentication and authorization slot,
// and WithCompression (gzip for large responses).
package filters
