package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/crdserver/crdserver/internal/apis/versionreport"
	"github.com/crdserver/crdserver/internal/retire"
)

// runVersions answers `crdserver versions`: for every version of every CRD
// (or of one), what crdserver sees of it and whether removing it breaks
// anything, from the server's VersionReports. With --check-remove it exits
// 0 only when removing the version breaks nothing, and 1 otherwise, with
// each blocker and its fix; 2 on a usage error.
func runVersions(args []string, out, errOut io.Writer) int {
	fs := flag.NewFlagSet("crdserver versions", flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), `usage: crdserver versions [flags] [<plural>.<group>]

For every version of every CRD (or of the one named): whether it is served,
the storage version, deprecated; how many objects are stored in it; which
clients called it within the window (every replica's requests); what refers
to it (managedFields entries, ownerReferences, admission webhooks and
policies, ConversionRules, status.storedVersions); and whether removing it
breaks nothing.

With --retire VERSION it walks the version's retirement and stops at the
first step that is not safe: refuse while clients called it within the
window (but those --ignore-client names) or while a webhook or policy would
stop matching; migrate the objects stored in it; rewrite the managedFields
entries and ownerReferences that name it to the storage version; drop it
from status.storedVersions; set served: false; and, with --remove, delete
it from spec.versions once no request reached it for --grace. Each step
skips what is done already: run it again to resume.`)
		fs.PrintDefaults()
	}
	kubeconfig := fs.String("kubeconfig", defaultKubeconfig(), "kubeconfig of the server")
	output := fs.String("o", "table", "output: table, json or yaml")
	checkRemove := fs.String("check-remove", "", "exit 0 only when removing this version of the CRD breaks nothing; otherwise list each blocker with what fixes it")
	retireV := fs.String("retire", "", "walk the retirement of this version of the CRD (see above)")
	dryRun := fs.Bool("dry-run", false, "with --retire: say what each step would do, change nothing")
	var ignore stringList
	fs.Var(&ignore, "ignore-client", "with --retire: a user, or the start of a user agent, whose calls do not hold the retirement back (repeatable)")
	remove := fs.Bool("remove", false, "with --retire: delete the version from spec.versions once no request reached it for --grace")
	grace := fs.Duration("grace", 24*time.Hour, "with --remove: how long no request may have reached the version before it is deleted")
	timeout := fs.Duration("timeout", time.Minute, "how long to wait for the server (with --retire: for the whole walk; 1h if not set)")
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return 2
		}
		if fs.NArg() == 0 {
			break
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
	usageErr := func(msg string) int {
		fmt.Fprintln(errOut, "crdserver versions:", msg)
		fs.Usage()
		return 2
	}
	if len(positional) > 1 || (len(positional) == 1 && !strings.Contains(positional[0], ".")) {
		return usageErr("name the CRD as <plural>.<group>")
	}
	if *checkRemove != "" && len(positional) == 0 {
		return usageErr("--check-remove needs the CRD")
	}
	if (*retireV != "" || *dryRun || *remove || len(ignore) > 0) && len(positional) == 0 {
		return usageErr("--retire needs the CRD")
	}
	if (*dryRun || *remove || len(ignore) > 0) && *retireV == "" {
		return usageErr("--dry-run, --remove and --ignore-client go with --retire")
	}
	if *retireV != "" && *checkRemove != "" {
		return usageErr("--retire or --check-remove, not both")
	}
	timeoutSet := false
	fs.Visit(func(f *flag.Flag) { timeoutSet = timeoutSet || f.Name == "timeout" })
	if *retireV != "" && !timeoutSet {
		*timeout = time.Hour
	}
	if *output != "table" && *output != "json" && *output != "yaml" {
		return usageErr("-o is table, json or yaml")
	}
	crd := ""
	if len(positional) == 1 {
		crd = positional[0]
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fmt.Fprintln(errOut, "crdserver versions:", err)
		return 1
	}
	client, err := retire.NewClient(cfg)
	if err != nil {
		fmt.Fprintln(errOut, "crdserver versions:", err)
		return 1
	}
	if *retireV != "" {
		err := client.Retire(ctx, retire.Options{CRD: crd, Version: *retireV, DryRun: *dryRun, IgnoreClients: ignore, Remove: *remove, Grace: *grace, Out: out})
		var stopped *retire.Stopped
		if errors.As(err, &stopped) {
			fmt.Fprintf(out, "%-16s STOPPED: %s\n  fix: %s\n", stopped.Step+":", stopped.Message, stopped.Fix)
			return 1
		}
		if err != nil {
			fmt.Fprintln(errOut, "crdserver versions:", err)
			return 1
		}
		return 0
	}
	reports, err := client.Reports(ctx, crd)
	if err != nil {
		fmt.Fprintln(errOut, "crdserver versions:", err)
		return 1
	}
	if crd != "" && len(reports) == 0 {
		fmt.Fprintf(errOut, "crdserver versions: no CRD %s\n", crd)
		return 1
	}
	if *checkRemove != "" {
		return checkRemoval(out, errOut, reports, crd, *checkRemove, *output)
	}
	return printReports(out, errOut, reports, *output)
}

func printReports(out, errOut io.Writer, reports []versionreport.VersionReport, output string) int {
	switch output {
	case "json", "yaml":
		b, err := json.MarshalIndent(versionreport.VersionReportList{Items: reports}, "", "  ")
		if err == nil && output == "yaml" {
			b, err = sigsyaml.JSONToYAML(b)
		}
		if err != nil {
			fmt.Fprintln(errOut, "crdserver versions:", err)
			return 1
		}
		fmt.Fprintln(out, strings.TrimSpace(string(b)))
		return 0
	}
	tw := tabwriter.NewWriter(out, 0, 4, 3, ' ', 0)
	fmt.Fprintln(tw, "CRD\tVERSION\tSERVED\tSTORAGE\tDEPRECATED\tOBJECTS\tCLIENTS\tREFERENCES\tVERDICT")
	for _, r := range reports {
		st := r.Status
		refs := len(st.References.ManagedFields) + len(st.References.OwnerReferences) + len(st.References.Admission)
		if st.References.ConversionRules != "" {
			refs++
		}
		verdict := "removable"
		if !st.Removable {
			var reasons []string
			for _, b := range st.Blockers {
				reasons = append(reasons, b.Reason)
			}
			verdict = "blocked: " + strings.Join(reasons, ",")
		}
		fmt.Fprintf(tw, "%s\t%s\t%t\t%t\t%t\t%d\t%d\t%d\t%s\n", r.Spec.CRD, r.Spec.Version, st.Served, st.Storage, st.Deprecated, st.Objects, len(st.Clients), refs, verdict)
	}
	if err := tw.Flush(); err != nil {
		return 1
	}
	return 0
}

// stringList is a flag given any number of times.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }

func (l *stringList) Set(v string) error {
	*l = append(*l, v)
	return nil
}

// checkRemoval says whether removing version from the CRD breaks nothing:
// 0 if so, 1 with the blockers and their fixes otherwise.
func checkRemoval(out, errOut io.Writer, reports []versionreport.VersionReport, crd, version, output string) int {
	var rep *versionreport.VersionReport
	for i := range reports {
		if reports[i].Spec.Version == version {
			rep = &reports[i]
		}
	}
	if rep == nil {
		fmt.Fprintf(errOut, "crdserver versions: %s has no version %s\n", crd, version)
		return 1
	}
	if output != "table" {
		if code := printReports(out, errOut, []versionreport.VersionReport{*rep}, output); code != 0 {
			return code
		}
		if rep.Status.Removable {
			return 0
		}
		return 1
	}
	if rep.Status.Removable {
		fmt.Fprintf(out, "%s of %s can be removed: nothing crdserver sees uses it (clients within %s, stored objects, references).\n", version, crd, rep.Status.Window)
		return 0
	}
	fmt.Fprintf(out, "%s of %s cannot be removed yet:\n", version, crd)
	for _, b := range rep.Status.Blockers {
		fmt.Fprintf(out, "- %s: %s\n  fix: %s\n", b.Reason, b.Message, b.Fix)
	}
	return 1
}
