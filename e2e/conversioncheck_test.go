package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crdserver/crdserver/internal/fixtures"
)

// `crdserver check-conversion` (cmd/crdserver/checkconversion.go) against
// a deliberately lossy conversion webhook (testdata/lossywebhook), which it
// must catch, and the project's example webhook, which it must pass; each
// directly (--webhook) and through a crdserver whose CRD uses the webhook
// (--kubeconfig).

// The lossy webhook, built the first time a test needs it.
var (
	ccLossyBuildOnce sync.Once
	ccLossyBin       string
	ccLossyBuildErr  error
)

func ccBuildLossyWebhook(t *testing.T) string {
	t.Helper()
	ccLossyBuildOnce.Do(func() {
		ccLossyBin = filepath.Join(filepath.Dir(crdserverBin), "lossywebhook")
		ccLossyBuildErr = goBuild(".", ccLossyBin, "./testdata/lossywebhook")
	})
	if ccLossyBuildErr != nil {
		t.Fatal(ccLossyBuildErr)
	}
	return ccLossyBin
}

// ccStartWebhookBinary runs a webhook binary that takes the example's flags
// (--bind-address, --port, --cert-out) on a free loopback port, as
// startWebhook runs the example.
func ccStartWebhookBinary(t *testing.T, bin string) *webhook {
	t.Helper()
	var errs []error
	for range 3 {
		w, err := tryStartWebhook(t, bin)
		if err == nil {
			t.Cleanup(w.stop)
			t.Logf("%s is serving on %s", filepath.Base(bin), w.url)
			return w
		}
		errs = append(errs, err)
		if !errors.Is(err, errPortTaken) {
			break
		}
	}
	t.Fatalf("start %s: %v", bin, errors.Join(errs...))
	return nil
}

// ccReport is the JSON output of check-conversion.
type ccReport struct {
	CRD        string         `json:"crd"`
	Via        string         `json:"via"`
	Versions   []string       `json:"versions"`
	Samples    map[string]int `json:"samples"`
	Live       map[string]int `json:"live"`
	Objects    int            `json:"objects"`
	RoundTrips int            `json:"roundTrips"`
	Lossless   int            `json:"lossless"`
	Lost       int            `json:"lost"`
	Changed    int            `json:"changed"`
	Failed     int            `json:"failed"`
	Losses     []ccLoss       `json:"losses"`
}

type ccLoss struct {
	fixtures.Loss
	Object string `json:"object"`
	Error  string `json:"error"`
}

// ccRunResult is one run of check-conversion.
type ccRunResult struct {
	result
	code int
}

// ccRun runs `crdserver check-conversion args...` in an empty
// folder, without $KUBECONFIG.
func ccRun(t *testing.T, args ...string) ccRunResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, crdserverBin, append([]string{"check-conversion"}, args...)...)
	cmd.Dir = t.TempDir()
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "KUBECONFIG=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := ccRunResult{result: result{cmdline: "crdserver check-conversion " + shellQuote(args), stdout: stdout.String(), stderr: stderr.String(), err: err}}
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("killed after %v:\n%s", commandTimeout, r)
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
	case err != nil:
		t.Fatalf("%v:\n%s", err, r)
	}
	return r
}

// report runs check-conversion with -o json, checks its exit status and
// decodes its report.
func (r ccRunResult) report(t *testing.T, wantCode int) ccReport {
	t.Helper()
	if r.code != wantCode {
		t.Fatalf("exit status %d, want %d:\n%s", r.code, wantCode, r)
	}
	var rep ccReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("the report is not JSON (%v):\n%s", err, r)
	}
	return rep
}

// ccManifest is a CRD file with URL and CABUNDLE filled in for w.
func ccManifest(t *testing.T, path string, w *webhook) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return fixtures.FillWebhook(string(data), w.url, w.caPEM)
}

func ccWriteFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// ccAssertPlantedLosses checks that every loss of the lossy webhook is
// found, and nothing else (fixtures.PlantedLossErrors).
func ccAssertPlantedLosses(t *testing.T, rep ccReport) {
	t.Helper()
	losses := make([]fixtures.Loss, len(rep.Losses))
	for i, l := range rep.Losses {
		losses[i] = l.Loss
	}
	for _, e := range fixtures.PlantedLossErrors(losses) {
		t.Error(e)
	}
	if rep.Failed != 0 || rep.Lossless == 0 || rep.RoundTrips != rep.Objects {
		t.Errorf("report: %d failed, %d lossless of %d round trips of %d objects", rep.Failed, rep.Lossless, rep.RoundTrips, rep.Objects)
	}
}

func TestCheckConversionFindsPlantedLosses(t *testing.T) {
	readSources()
	w := ccStartWebhookBinary(t, ccBuildLossyWebhook(t))
	crd := fixtures.LossyWidgetsCRD(w.url, w.caPEM)

	t.Run("webhook", func(t *testing.T) {
		crdFile := ccWriteFile(t, "crd.yaml", crd)
		caFile := ccWriteFile(t, "ca.crt", string(w.caPEM))
		rep := ccRun(t, crdFile, "--webhook", w.url, "--ca", caFile, "--samples", "30", "-o", "json").report(t, 1)
		if rep.Via != "webhook" || rep.Objects != 60 {
			t.Errorf("report: %+v", rep)
		}
		ccAssertPlantedLosses(t, rep)
	})

	t.Run("server", func(t *testing.T) {
		srv := startServer(t)
		k := newKubectl(t, srv)
		k.runStdin(t, crd, "apply", "-f", "-")
		k.run(t, "wait", "--for=condition=Established", "crd/widgets.lossy.example.com", "--timeout=60s")
		rep := ccRun(t, "widgets.lossy.example.com", "--kubeconfig", srv.kubeconfig, "--samples", "30", "-o", "json").report(t, 1)
		if rep.Via != "server" || rep.Objects != 60 {
			t.Errorf("report: %+v", rep)
		}
		ccAssertPlantedLosses(t, rep)

		// The text output: one line per loss, then the summary.
		r := ccRun(t, "widgets.lossy.example.com", "--kubeconfig", srv.kubeconfig, "--samples", "10")
		if r.code != 1 {
			t.Fatalf("exit status %d:\n%s", r.code, r)
		}
		ls := lines(r.stdout)
		line := regexp.MustCompile(`^(lost|changed) v1→v2→v1 object=widget-v1-\d{3} path=spec\.(legacyNote|tier|code) original=.+ after=.+$`)
		for _, l := range ls[:len(ls)-1] {
			if !line.MatchString(l) {
				t.Errorf("line %q", l)
			}
		}
		if !strings.HasPrefix(ls[len(ls)-1], "summary: crd=widgets.lossy.example.com via=server versions=v1,v2 objects=20 round-trips=20 ") {
			t.Errorf("summary %q", ls[len(ls)-1])
		}

		// Nothing is left behind: no widget, no scratch namespace.
		if out := k.run(t, "get", "widgets.v1.lossy.example.com", "-A", "-o", "name"); strings.TrimSpace(out) != "" {
			t.Errorf("widgets left:\n%s", out)
		}
		deadline := time.Now().Add(eventTimeout)
		for {
			out := k.run(t, "get", "namespaces", "-o", "name")
			if !strings.Contains(out, "crdserver-check-") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("scratch namespaces left after %v:\n%s", eventTimeout, out)
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
}

func TestCheckConversionPassesExampleWebhook(t *testing.T) {
	readSources()
	w := startWebhook(t)
	crd := ccManifest(t, "../examples/crontab-conversion/crd.yaml", w)
	caFile := ccWriteFile(t, "ca.crt", string(w.caPEM))

	t.Run("webhook", func(t *testing.T) {
		crdFile := ccWriteFile(t, "crd.yaml", crd)
		rep := ccRun(t, crdFile, "--webhook", w.url, "--ca", caFile, "--samples", "30", "-o", "json").report(t, 0)
		if len(rep.Losses) != 0 || rep.RoundTrips != 60 || rep.Lossless != 60 {
			t.Errorf("report: %+v", rep)
		}
	})

	t.Run("server", func(t *testing.T) {
		srv := startServer(t)
		k := newKubectl(t, srv)
		k.runStdin(t, crd, "apply", "-f", "-")
		k.run(t, "wait", "--for=condition=Established", "crd/crontabs.example.com", "--timeout=60s")
		// The README's object is checked too (--from-cluster).
		k.run(t, "apply", "-f", "../examples/crontab-conversion/crontab-v1beta1.yaml")
		r := ccRun(t, "crontabs.example.com", "--kubeconfig", srv.kubeconfig, "--samples", "30", "--from-cluster", "-o", "json")
		rep := r.report(t, 0)
		if len(rep.Losses) != 0 || rep.Live["v1beta1"] != 1 || rep.Live["v1"] != 1 || rep.Objects != 62 || rep.Lossless != 62 {
			t.Errorf("report: %+v", rep)
		}
		if got := k.run(t, "get", "crontabs.v1.example.com", "-A", "-o", "name"); strings.TrimSpace(got) != "crontab.example.com/my-cron" {
			t.Errorf("crontabs after the check:\n%s", got)
		}
	})

}

// TestCheckConversionPassesDeclarativeRules checks the declarative
// example's ConversionRules through the server, samples and the README's
// object alike.
func TestCheckConversionPassesDeclarativeRules(t *testing.T) {
	srv := startServer(t)
	k := newKubectl(t, srv)
	k.run(t, "apply", "-f", declDir+"crd.yaml")
	k.run(t, "wait", "--for=condition=Established", "crd/crontabs.example.com", "--timeout=60s")
	k.run(t, "apply", "-f", declDir+"rules.yaml")
	k.run(t, "apply", "-f", declDir+"crontab-v1beta1.yaml")
	rep := ccRun(t, "crontabs.example.com", "--kubeconfig", srv.kubeconfig, "--samples", "30", "--from-cluster", "-o", "json").report(t, 0)
	if len(rep.Losses) != 0 || rep.Live["v1beta1"] != 1 || rep.Live["v1"] != 1 || rep.Objects != 62 || rep.Lossless != 62 {
		t.Errorf("report: %+v", rep)
	}
}
