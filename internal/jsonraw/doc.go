// Package jsonraw edits encoded JSON objects in place, without decoding
// them, for the few edits on crdserver's hot paths: setting
// metadata.resourceVersion on an object read from storage, and reading or
// setting its top-level string fields (apiVersion, kind).
//
// Every function takes a complete JSON object and returns a new slice; the
// input is never modified. Malformed input returns an error.
package jsonraw
