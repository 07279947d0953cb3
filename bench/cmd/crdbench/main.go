// Command crdbench is crdserver's whole-server benchmark. It talks to any
// Kubernetes-style API server that serves a custom resource (crdserver or the
// upstream apiextensions-apiserver) over plain HTTP or HTTPS, with plain
// net/http and no client-go, and only to loopback addresses.
//
// Subcommands:
//
//	crdbench load     -server URL [TLS flags] -n 1000 -list-n 10000 -json F
//	    waits until a CRD is Established, then: n sequential creates, the same
//	    n sequential deletes, list-n creates with -concurrency workers, and
//	    -lists plain GETs of the whole collection (no limit).
//	crdbench convert  -server URL [TLS flags] -n 10000 -lists 7 -json F
//	    webhook conversion: serves the example CronTab conversion
//	    webhook in-process over TLS, counting its calls; creates a Webhook CRD
//	    and a None CRD (v1beta1 storage, v1 served), n objects in v1beta1 in
//	    each, then times GETs of each collection in v1 and in v1beta1.
//	crdbench rules    -server URL [TLS flags] -n 10000 -rounds 3 -json F
//	    declarative conversion (crdserver only): the CronTab list converted
//	    by ConversionRules in process, through the example webhook, and by
//	    None; per round, n objects in a fresh namespace in each CRD, one
//	    cold GET of each collection in v1, then -warm warm GETs.
//	crdbench core     -server URL [TLS flags] -pid name=PID... -json F
//	    built-in types: n sequential ConfigMap creates and gets in a namespace
//	    it creates, plain GETs of their collection, then -leases Leases
//	    renewed every -lease-period for -lease-duration as client-go's leader
//	    election renews them, with the server's CPU time and VmRSS.
//	crdbench admission -server URL [TLS flags] -n 2000 -rounds 3 -json F
//	    dynamic admission: per round, n creates of a custom resource with
//	    -concurrency workers under each configuration in turn: no admission,
//	    1 and 10 bound ValidatingAdmissionPolicies, and one validating
//	    webhook that crdbench serves on loopback; the objects are deleted
//	    after each, the admission objects at the end.
//	crdbench paths    -server URL [TLS flags] -n 10000 -rounds 3 -json F
//	    the request paths not measured elsewhere, per round
//	    on CRDs of its own (deleted again): sequential GETs, creates with 16
//	    workers, a full list with gzip, paged walks, watch fan-out to 200 and
//	    1,000 watchers, deleting a CRD of n objects, the first create after
//	    Established, the first list through a conversion webhook after a CRD
//	    edit and after a flip None -> Webhook, and RSS with n 1-KiB objects.
//	crdbench crds     -server URL [TLS flags] -corpus F.tar.zst -rss-pid name=PID... -json F
//	    thousands of CRDs: a corpus installed -concurrency at a time until
//	    all are Established, memory empty and settled, aggregated discovery
//	    and OpenAPI v3 documents cold, a first dry-run create of every CRD
//	    and memory after it, /openapi/v2, every CRD re-applied with a
//	    changed description while watches stay open, and every CRD deleted.
//	crdbench start    -readyz URL [-rss-pid name=PID]... -json F -- CMD ARGS...
//	    launches CMD, times launch -> /readyz "ok", waits -idle, reads VmRSS
//	    of CMD (and of the other PIDs), then stops CMD.
//	crdbench rss      -json F name=PID...
//	    reads VmRSS/VmHWM of running processes.
//	crdbench freeport -n 4
//	    prints n free loopback TCP ports.
//	crdbench report   -dir DIR -out RESULTS.md
//	    turns the JSON files of one run (see run.sh), and the go test -bench
//	    output in gobench.txt, into a Markdown report.
//
// bench/run.sh drives all of these against crdserver and the reference
// server; see bench/README.md.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "load":
		err = runLoad(os.Args[2:])
	case "convert":
		err = runConvert(os.Args[2:])
	case "rules":
		err = runRules(os.Args[2:])
	case "core":
		err = runCore(os.Args[2:])
	case "admission":
		err = runAdmission(os.Args[2:])
	case "paths":
		err = runPaths(os.Args[2:])
	case "crds":
		err = runCRDs(os.Args[2:])
	case "start":
		err = runStart(os.Args[2:])
	case "rss":
		err = runRSS(os.Args[2:])
	case "freeport":
		err = runFreePort(os.Args[2:])
	case "report":
		err = runReport(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "crdbench:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: crdbench load|convert|rules|core|admission|paths|crds|start|rss|freeport|report [flags]  (crdbench SUBCOMMAND -h for flags)")
	os.Exit(2)
}

// done ends a workload's run: its error, if any, into errField; the result
// shown and written as JSON to jsonOut (if given). A run that recorded
// failures fs ends in an error.
func done(jsonOut string, res any, errField *string, fs []failure, err error) error {
	if err != nil {
		*errField = err.Error()
	}
	show(res, fs, *errField, jsonOut == "")
	if jsonOut != "" {
		if werr := writeJSON(jsonOut, res); werr != nil {
			return werr
		}
	}
	if err == nil && len(fs) > 0 {
		err = fmt.Errorf("%d failure(s)", len(fs))
	}
	return err
}

// show is every workload's printout: a line for each timed phase of the
// result (found by walking it), its failures and its error; with asJSON
// (no -json file) also the whole result, which holds every other figure.
func show(res any, fs []failure, errText string, asJSON bool) {
	fmt.Printf("%-9s %4s %6s %6s %9s %9s %8s %8s %8s %8s %8s\n", "phase", "conc", "reqs", "errors", "wall_s", "req/s", "mean_ms", "p50_ms", "p90_ms", "p99_ms", "max_ms")
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Pointer, reflect.Interface:
			if !v.IsNil() {
				walk(v.Elem())
			}
		case reflect.Slice, reflect.Array:
			for i := 0; i < v.Len(); i++ {
				walk(v.Index(i))
			}
		case reflect.Struct:
			if p, ok := v.Interface().(phase); ok {
				fmt.Printf("%-9s %4d %6d %6d %9.3f %9.1f %8.2f %8.2f %8.2f %8.2f %8.2f\n", p.Name, p.Concurrency, p.Requests, p.Errors, p.WallSec, p.PerSecond, p.MeanMs, p.P50Ms, p.P90Ms, p.P99Ms, p.MaxMs)
				return
			}
			for i := 0; i < v.NumField(); i++ {
				if v.Type().Field(i).IsExported() {
					walk(v.Field(i))
				}
			}
		}
	}
	walk(reflect.ValueOf(res))
	if asJSON {
		b, _ := json.MarshalIndent(res, "", "  ")
		fmt.Println(string(b))
	}
	for _, f := range fs {
		fmt.Printf("FAILED %s: %s %s -> HTTP %d %s %s\n", f.Phase, f.Method, f.Path, f.Status, f.Error, strings.Join(strings.Fields(f.Body), " "))
	}
	if errText != "" {
		fmt.Printf("ERROR: %s\n", errText)
	}
}

// firstError is the first failed request of each phase.
func firstError(ps ...phase) []failure {
	var fs []failure
	for _, p := range ps {
		if p.FirstError != nil {
			fs = append(fs, *p.FirstError)
		}
	}
	return fs
}

// bound is a check of a subcommand's flags: when broken, the run stops
// with "need " + need.
type bound struct {
	broken bool
	need   string
}

// checkFlags returns the error of the first broken bound.
func checkFlags(bs []bound) error {
	for _, b := range bs {
		if b.broken {
			return errors.New("need " + b.need)
		}
	}
	return nil
}
