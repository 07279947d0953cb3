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
	"os/signal"
	"strings"
	"syscall"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/crdserver/crdserver/internal/conversion"
	"github.com/crdserver/crdserver/internal/roundtrip"
	"github.com/crdserver/crdserver/internal/samples"
)

const checkConversionUsage = `usage: crdserver check-conversion <crd name or CRD file> [--kubeconfig FILE | --webhook URL --ca FILE] [--samples N] [--seed S] [--from-cluster] [-o text|json]

Checks that a CRD's conversion keeps objects whole (Rule 2 of Kubernetes'
deprecation policy: objects round-trip between the versions of a release
without losing information). For each served version A and each other
served version B, sample objects made from A's schema (and, with
--from-cluster, the objects the server holds, read in A) are converted
A→B→A and compared with the originals; every value lost or changed, and
every conversion that fails or gives an object B's schema refuses, is
reported.

  Through a server (--kubeconfig, the default): the server's own
  conversion, with the server's copy of the CRD. Each object is created in
  A in a scratch namespace crdserver-check-<random>, read in B, created
  again from that in B, read in A and compared with what the server
  answered to the first create. Everything is deleted at the end.

  Through a webhook (--webhook URL --ca FILE): ConversionReviews
  (apiextensions.k8s.io/v1) go to the webhook directly, A→B then B→A; the
  CRD may be a file, no server needed.

A field absent on one side and empty on the other ("", 0, false, null, {},
[]) is no loss unless --strict: Go types with omitempty cannot tell them
apart.

Output: one line per loss,
  lost|changed <A>→<B>→<A> object=<name> path=<path> original=<v> after=<v>
  failed <A>→<B>→<A> object=<name> error=<message>
then a summary line; or one JSON document (-o json).

Exit status: 0 every round trip is lossless, 1 losses or failed
conversions, 2 usage or setup errors.

Flags:
`

// checkConversionMaxLive bounds the objects of one version --from-cluster checks.
const checkConversionMaxLive = 500

// checkConversion runs `crdserver check-conversion args...` and returns
// its exit status.
func checkConversion(args []string, stdout, stderr io.Writer) (code int) {
	fs := flag.NewFlagSet("crdserver check-conversion", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), checkConversionUsage)
		fs.PrintDefaults()
	}
	var (
		kubeconfig  = fs.String("kubeconfig", "", "kubeconfig of the server (default $KUBECONFIG, else crdserver-data/admin.kubeconfig)")
		webhookURL  = fs.String("webhook", "", "convert through this conversion webhook (https URL) directly, not through a server")
		caFile      = fs.String("ca", "", "with --webhook: the CA certificate (PEM) that verifies the webhook's certificate (default: the system's roots)")
		n           = fs.Int("samples", 20, "sample objects to make per served version")
		seed        = fs.Int64("seed", 1, "seed of the samples: the same seed makes the same samples")
		fromCluster = fs.Bool("from-cluster", false, fmt.Sprintf("also check the objects the server holds (at most %d per version)", checkConversionMaxLive))
		output      = fs.String("o", "text", "output: text or json")
		strict      = fs.Bool("strict", false, "count a field absent on one side and empty on the other as a loss")
		timeout     = fs.Duration("timeout", 10*time.Minute, "bound on the whole check")
	)
	// Flags may come before or after the CRD, as with kubectl.
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return 0
			}
			return 2
		}
		if fs.NArg() == 0 {
			break
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
	usageError := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "crdserver check-conversion: "+format+"\n", a...)
		fmt.Fprintln(stderr, "Run 'crdserver check-conversion -h' for help.")
		return 2
	}
	switch {
	case len(positional) != 1:
		return usageError("name one CRD (its name, or a file)")
	case *output != "text" && *output != "json":
		return usageError("-o is text or json, not %q", *output)
	case *n < 0:
		return usageError("--samples must not be negative")
	case *caFile != "" && *webhookURL == "":
		return usageError("--ca goes with --webhook")
	case *webhookURL != "" && !strings.HasPrefix(*webhookURL, "https://"):
		return usageError("--webhook must be an https URL")
	case *timeout <= 0:
		return usageError("--timeout must be positive")
	}
	setupError := func(err error) int {
		fmt.Fprintln(stderr, "crdserver check-conversion:", err)
		return 2
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()

	target := positional[0]
	var crd *apiextensionsv1.CustomResourceDefinition
	isFile := false
	if st, err := os.Stat(target); err == nil && !st.IsDir() {
		isFile = true
		if crd, err = readConversionCRDFile(target); err != nil {
			return setupError(err)
		}
	} else if strings.ContainsRune(target, os.PathSeparator) || strings.HasSuffix(target, ".yaml") || strings.HasSuffix(target, ".yml") || strings.HasSuffix(target, ".json") {
		return setupError(fmt.Errorf("no CRD file %s", target))
	}
	viaServer := *webhookURL == ""
	var cfg *rest.Config
	var client dynamic.Interface
	if viaServer || !isFile || *fromCluster {
		path := *kubeconfig
		if path == "" {
			path = defaultKubeconfig()
		}
		var err error
		if cfg, err = clientcmd.BuildConfigFromFlags("", path); err != nil {
			return setupError(fmt.Errorf("kubeconfig: %w", err))
		}
		cfg.QPS, cfg.Burst = 100, 200
		cfg.Timeout = time.Minute              // per request
		cfg.WarningHandler = rest.NoWarnings{} // deprecated versions are read on purpose
		if client, err = dynamic.NewForConfig(cfg); err != nil {
			return setupError(err)
		}
		if viaServer || !isFile {
			ext, err := apiextensionsclient.NewForConfig(cfg)
			if err != nil {
				return setupError(err)
			}
			name := target
			if isFile {
				name = crd.Name
			}
			if crd, err = ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{}); err != nil {
				return setupError(fmt.Errorf("the CRD %s on the server: %w", name, err))
			}
		}
	}
	served := roundtrip.ServedVersions(crd)

	rep := conversionReport{
		CRD:      crd.Name,
		Via:      "server",
		Versions: served,
		Seed:     *seed,
		Samples:  map[string]int{},
		Losses:   []roundtrip.Loss{},
	}
	if !viaServer {
		rep.Via = "webhook"
	}
	bySample := map[string][]map[string]any{}
	for i, v := range served {
		objs, err := samples.Generate(ctx, crd, v, *n, *seed+int64(i))
		if err != nil {
			return setupError(fmt.Errorf("samples of %s: %w", v, err))
		}
		if len(objs) < *n {
			fmt.Fprintf(stderr, "crdserver check-conversion: only %d of %d samples of %s are valid (the others were dropped)\n", len(objs), *n, v)
		}
		rep.Samples[v] = len(objs)
		if *fromCluster {
			live, err := roundtrip.Live(ctx, client, crd, v, checkConversionMaxLive)
			if err != nil {
				return setupError(err)
			}
			if rep.Live == nil {
				rep.Live = map[string]int{}
			}
			rep.Live[v] = len(live)
			objs = append(objs, live...)
		}
		bySample[v] = objs
		rep.Objects += len(objs)
		rep.RoundTrips += len(objs) * (len(served) - 1)
	}

	if len(served) > 1 && rep.Objects > 0 {
		var conv conversion.Converter
		if viaServer {
			srv, err := roundtrip.NewServer(ctx, client, crd)
			if err != nil {
				return setupError(err)
			}
			defer func() {
				// Clean up even after a failure or an interrupt.
				cctx, ccancel := context.WithTimeout(context.Background(), time.Minute)
				defer ccancel()
				if err := srv.Close(cctx); err != nil {
					fmt.Fprintln(stderr, "crdserver check-conversion:", err)
					code = 2
				}
			}()
			conv = srv
		} else {
			var caPEM []byte
			if *caFile != "" {
				var err error
				if caPEM, err = os.ReadFile(*caFile); err != nil {
					return setupError(err)
				}
			}
			w, err := roundtrip.NewWebhook(crd, *webhookURL, caPEM, 30*time.Second)
			if err != nil {
				return setupError(err)
			}
			defer conversion.Close(w)
			conv = w
		}
		losses, err := roundtrip.RoundTripWithOptions(ctx, crd, conv, bySample, roundtrip.Options{Strict: *strict})
		if err != nil {
			return setupError(err)
		}
		rep.Losses = losses
	}
	rep.count()
	if err := rep.write(stdout, *output); err != nil {
		return setupError(err)
	}
	if len(rep.Losses) > 0 {
		return 1
	}
	return 0
}

// readConversionCRDFile reads the first CustomResourceDefinition of a YAML or JSON
// file (of one or more documents).
func readConversionCRDFile(path string) (*apiextensionsv1.CustomResourceDefinition, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for range 1000 {
		var doc json.RawMessage
		if err := dec.Decode(&doc); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		var head metav1.TypeMeta
		if err := json.Unmarshal(doc, &head); err != nil || head.Kind != "CustomResourceDefinition" {
			continue
		}
		if head.APIVersion != apiextensionsv1.SchemeGroupVersion.String() {
			return nil, fmt.Errorf("%s: a CustomResourceDefinition of %s; only %s is supported", path, head.APIVersion, apiextensionsv1.SchemeGroupVersion)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(doc, crd); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return crd, nil
	}
	return nil, fmt.Errorf("%s holds no CustomResourceDefinition", path)
}

// conversionReport is what check-conversion found.
type conversionReport struct {
	CRD      string         `json:"crd"`
	Via      string         `json:"via"` // server or webhook
	Versions []string       `json:"versions"`
	Seed     int64          `json:"seed"`
	Samples  map[string]int `json:"samples"`        // by version
	Live     map[string]int `json:"live,omitempty"` // by version, with --from-cluster
	Objects  int            `json:"objects"`
	// RoundTrips counts (object, other version) pairs; Lossless those
	// without a loss.
	RoundTrips int              `json:"roundTrips"`
	Lossless   int              `json:"lossless"`
	Lost       int              `json:"lost"`
	Changed    int              `json:"changed"`
	Failed     int              `json:"failed"`
	Losses     []roundtrip.Loss `json:"losses"`
}

func (r *conversionReport) count() {
	lossy := map[string]bool{}
	for _, l := range r.Losses {
		switch l.Kind {
		case roundtrip.Lost:
			r.Lost++
		case roundtrip.Changed:
			r.Changed++
		case roundtrip.Failed:
			r.Failed++
		}
		lossy[l.From+"|"+l.To+"|"+l.Object] = true
	}
	r.Lossless = r.RoundTrips - len(lossy)
}

func (r *conversionReport) write(w io.Writer, format string) error {
	if format == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		return enc.Encode(r)
	}
	var b strings.Builder
	for _, l := range r.Losses {
		b.WriteString(l.String())
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "summary: crd=%s via=%s versions=%s objects=%d round-trips=%d lossless=%d lost=%d changed=%d failed=%d\n",
		r.CRD, r.Via, strings.Join(r.Versions, ","), r.Objects, r.RoundTrips, r.Lossless, r.Lost, r.Changed, r.Failed)
	_, err := io.WriteString(w, b.String())
	return err
}
