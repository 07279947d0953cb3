// Command crdbench is crdserver's whole-server benchmark. It talks to any
// Kubernetes-style API server (crdserver, the reference apiextensions-apiserver
// or kube-apiserver) over HTTP or HTTPS with net/http, only on loopback.
// Subcommands: load, convert, rules, core, admission, paths, crds, apf, objects (workloads,
// each writing its figures as JSON with -json), start (launch → /readyz and
// idle RSS), rss, freeport, and report (the JSON files of one run into
// RESULTS.md). bench/run.sh drives them; bench/README.md says what each
// measures, and `crdbench SUBCOMMAND -h` lists its flags.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"time"
)

func main() {
	cmds := map[string]func([]string) error{"load": runLoad, "convert": runConvert, "rules": runRules, "core": runCore,
		"admission": runAdmission, "paths": runPaths, "crds": runCRDs, "apf": runAPF, "objects": runObjects, "start": runStart, "rss": runRSS, "freeport": runFreePort, "report": runReport}
	if len(os.Args) < 2 || cmds[os.Args[1]] == nil {
		fmt.Fprintln(os.Stderr, "usage: crdbench load|convert|rules|core|admission|paths|crds|apf|objects|start|rss|freeport|report [flags]  (crdbench SUBCOMMAND -h for flags)")
		os.Exit(2)
	}
	if err := cmds[os.Args[1]](os.Args[2:]); err != nil {
		fmt.Fprintln(os.Stderr, "crdbench:", err)
		os.Exit(1)
	}
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

// ranged is a flag with the values it may take.
type ranged[T int | time.Duration] struct {
	v           *T
	name        string
	def, lo, hi T
	use         string
}

// rangedFlags defines flags with define (fs.IntVar, fs.DurationVar); the func
// it returns checks them, after fs.Parse.
func rangedFlags[T int | time.Duration](define func(*T, string, T, string), fl ...ranged[T]) func() error {
	for _, f := range fl {
		define(f.v, f.name, f.def, f.use)
	}
	return func() error {
		for _, f := range fl {
			if *f.v < f.lo || *f.v > f.hi {
				return fmt.Errorf("need %v <= -%s <= %v", f.lo, f.name, f.hi)
			}
		}
		return nil
	}
}
