package evolution_test

import (
	"context"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/crdserver/crdserver/internal/evolution"
)

func Example() {
	decode := func(doc string) *apiextensionsv1.CustomResourceDefinition {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal([]byte(doc), crd); err != nil {
			panic(err)
		}
		return crd
	}
	old := decode(`
spec:
  group: stable.example.com
  scope: Namespaced
  names: {plural: crontabs, kind: CronTab}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              cronSpec: {type: string}
              image: {type: string}
              replicas: {type: integer, maximum: 10}
`)
	updated := decode(`
spec:
  group: stable.example.com
  scope: Namespaced
  names: {plural: crontabs, kind: CronTab}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [cronSpec]
            properties:
              cronSpec: {type: string}
              replicas: {type: integer, maximum: 5}
              suspend: {type: boolean}
`)
	findings := evolution.CheckCRD(context.Background(), old, updated, evolution.Options{})
	fmt.Print(evolution.FormatText(findings))
	// Output:
	// required-added version=v1 path=.spec.cronSpec: field cronSpec is now required
	// field-removed version=v1 path=.spec.image: field image was removed
	// maximum-lowered version=v1 path=.spec.replicas: maximum lowered from 10 to 5
}
