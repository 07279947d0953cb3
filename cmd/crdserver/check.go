package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/crdserver/crdserver/internal/evolution"
)

// Exit codes of crdserver check-crd.
const (
	checkOK       = 0 // no findings
	checkFindings = 1 // findings printed
	checkUsage    = 2 // usage or input error
)

const checkUsageText = `usage: crdserver check-crd [-o text|json] [--kubeconfig FILE] OLD NEW

Compares two revisions of a CustomResourceDefinition and prints the changes
that break its clients or its stored objects, by Kubernetes' deprecation
policy: removed fields, narrower types and constraints, new required fields
and CEL rules, versions unserved without deprecation, deprecations without
an as stable replacement, the storage version moving to a less stable one,
a changed scope or names. Additions are never reported.

OLD and NEW are files holding one apiextensions.k8s.io/v1
CustomResourceDefinition each, in YAML or JSON ("-" reads standard input,
for one of them), or crd/<name> for the live CRD on the server of
--kubeconfig. With a live OLD, a new constraint (required, enum, pattern,
bounds, CEL rule) is reported only when one of the CRD's stored objects
fails it (up to 1,000 per version), as the server checks a change.

Without a conversion webhook, what one served version refuses that another
accepts is reported too (an object written through the one fails updates
through the other), when this revision brings it.

Text output is one line a finding: <rule> version=<v> path=<p>: <message>.
A finding that breaks nothing (such as a default added that the field's
description already stated) has a message starting "info: ", and
"severity": "info" in JSON; the others are "breaking".

Exit status: 0 no findings, 1 findings, 2 usage or input error (findings
of severity info alone exit 0).

Flags:`

// runCheck runs crdserver check-crd and returns its exit status.
func runCheck(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("crdserver check-crd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), checkUsageText)
		fs.PrintDefaults()
	}
	output := fs.String("o", "text", "output format: text or json")
	kubeconfig := fs.String("kubeconfig", defaultKubeconfig(), "kubeconfig of the server crd/<name> is read from")
	// Flags may come before or after the files, as with kubectl.
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return checkOK
			}
			return checkUsage
		}
		if fs.NArg() == 0 {
			break
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
	inputError := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "crdserver check-crd: "+format+"\n", a...)
		return checkUsage
	}
	usageError := func(format string, a ...any) int {
		inputError(format, a...)
		fmt.Fprintln(stderr, "run crdserver check-crd -h for help")
		return checkUsage
	}
	if *output != "text" && *output != "json" {
		return usageError("-o must be text or json, not %q", *output)
	}
	if len(positional) != 2 {
		return usageError("want OLD and NEW, got %d arguments", len(positional))
	}
	if positional[0] == "-" && positional[1] == "-" {
		return usageError("only one of OLD and NEW can be standard input")
	}
	var crds [2]*apiextensionsv1.CustomResourceDefinition
	for i, src := range positional {
		crd, err := loadCheckedCRD(src, stdin, *kubeconfig)
		if err != nil {
			return inputError("%s: %v", src, err)
		}
		crds[i] = crd
	}
	opts := evolution.Options{Info: true}
	if isLiveCRD(positional[0]) {
		// As the server checks a change: a new constraint counts only if
		// a stored object fails it.
		objs, err := liveObjects(crds[0], *kubeconfig)
		if err != nil {
			return inputError("%s: its objects: %v", positional[0], err)
		}
		opts.ExistingObjects = func(version string) []map[string]any { return objs[version] }
	}
	// The command's own context: nothing above it to inherit from.
	findings := evolution.CheckCRD(context.Background(), crds[0], crds[1], opts)
	switch *output {
	case "json":
		if findings == nil {
			findings = []evolution.Finding{}
		}
		b, err := json.MarshalIndent(findings, "", "  ")
		if err != nil {
			return inputError("%v", err)
		}
		fmt.Fprintln(stdout, string(b))
	default:
		fmt.Fprint(stdout, evolution.FormatText(findings))
	}
	for _, f := range findings {
		if f.Breaking() {
			return checkFindings
		}
	}
	return checkOK
}

// liveName is the name of the live CRD src names (crd/<name>), if it
// names one rather than a file.
func liveName(src string) (string, bool) {
	for _, prefix := range []string{"crd/", "crds/", "customresourcedefinition/", "customresourcedefinitions/", "customresourcedefinition.apiextensions.k8s.io/"} {
		if name, ok := strings.CutPrefix(src, prefix); ok {
			if _, err := os.Stat(src); err == nil {
				return "", false // a file of that name wins
			}
			return name, true
		}
	}
	return "", false
}

func isLiveCRD(src string) bool { _, ok := liveName(src); return ok }

// maxLiveObjects bounds the objects read per version, as the server bounds
// the ones it checks.
const maxLiveObjects = 1000

// liveObjects reads the stored objects of a live CRD in each of its served
// versions (at most maxLiveObjects each).
func liveObjects(crd *apiextensionsv1.CustomResourceDefinition, kubeconfig string) (map[string][]map[string]any, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out := map[string][]map[string]any{}
	for _, v := range crd.Spec.Versions {
		if !v.Served {
			continue
		}
		gvr := schema.GroupVersionResource{Group: crd.Spec.Group, Version: v.Name, Resource: crd.Spec.Names.Plural}
		list, err := client.Resource(gvr).List(ctx, metav1.ListOptions{Limit: maxLiveObjects})
		if apierrors.IsNotFound(err) {
			continue // not served yet (not Established): nothing stored
		}
		if err != nil {
			return nil, err
		}
		for _, it := range list.Items {
			out[v.Name] = append(out[v.Name], it.Object)
		}
	}
	return out, nil
}

// loadCheckedCRD reads a CRD from a file, standard input ("-") or the server
// (crd/<name>).
func loadCheckedCRD(src string, stdin io.Reader, kubeconfig string) (*apiextensionsv1.CustomResourceDefinition, error) {
	if name, ok := liveName(src); ok {
		return liveCheckedCRD(name, kubeconfig)
	}
	var data []byte
	var err error
	if src == "-" {
		data, err = io.ReadAll(stdin)
	} else {
		data, err = os.ReadFile(src)
	}
	if err != nil {
		return nil, err
	}
	return decodeCheckedCRD(data)
}

// decodeCheckedCRD decodes one apiextensions.k8s.io/v1 CRD from YAML or JSON.
func decodeCheckedCRD(data []byte) (*apiextensionsv1.CustomResourceDefinition, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var docs []json.RawMessage
	for {
		var doc json.RawMessage
		if err := dec.Decode(&doc); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, err
		}
		if len(bytes.TrimSpace(doc)) == 0 || string(bytes.TrimSpace(doc)) == "null" {
			continue
		}
		docs = append(docs, doc)
	}
	if len(docs) != 1 {
		return nil, fmt.Errorf("want one CustomResourceDefinition, found %d documents", len(docs))
	}
	var tm metav1.TypeMeta
	if err := json.Unmarshal(docs[0], &tm); err != nil {
		return nil, err
	}
	if tm.APIVersion != apiextensionsv1.SchemeGroupVersion.String() || tm.Kind != "CustomResourceDefinition" {
		return nil, fmt.Errorf("want an %s CustomResourceDefinition, found apiVersion %q kind %q", apiextensionsv1.SchemeGroupVersion, tm.APIVersion, tm.Kind)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(docs[0], crd); err != nil {
		return nil, err
	}
	apiextensionsv1.SetObjectDefaults_CustomResourceDefinition(crd)
	return crd, nil
}

// liveCheckedCRD reads a CRD from the server of a kubeconfig.
func liveCheckedCRD(name, kubeconfig string) (*apiextensionsv1.CustomResourceDefinition, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	client, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
}
