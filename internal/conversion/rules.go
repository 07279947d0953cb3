package conversion

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	rulesv1alpha1 "github.com/crdserver/crdserver/internal/apis/conversionrules/v1alpha1"
	"github.com/crdserver/crdserver/internal/jsonraw"
)

// Declarative conversion: a CRD's versions converted in process by a
// RuleSet, the spec of its ConversionRules (the types are the API's,
// internal/apis/conversionrules/v1alpha1). rulescompile.go checks a rule
// set and compiles it into steps (rulessteps.go, rulescel.go); Rules runs
// them, through the hub, as a Converter; rulesserver.go answers
// ConversionReviews with them.

// compiled is a RuleSet ready to run.
type compiled struct {
	hub     string
	toHub   map[string][]step // by version
	fromHub map[string][]step
}

// convert converts one decoded object to version to (of the same group),
// through the hub.
func (c *compiled) convert(obj map[string]any, from, to string) error {
	if from == to {
		return nil
	}
	if from != c.hub {
		for _, s := range c.toHub[from] {
			if err := s.apply(obj); err != nil {
				return err
			}
		}
	}
	if to != c.hub {
		for _, s := range c.fromHub[to] {
			if err := s.apply(obj); err != nil {
				return err
			}
		}
	}
	return nil
}

// decodeNumbers decodes a JSON object keeping numbers exact (json.Number).
func decodeNumbers(raw []byte) (map[string]any, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var obj map[string]any
	if err := d.Decode(&obj); err != nil {
		return nil, err
	}
	return obj, nil
}

// Rules converts a CRD's objects with a compiled RuleSet.
type Rules struct {
	group string
	c     *compiled
}

// NewRules returns the converter of a rule set for the CRD of group with
// the given versions; errors name the rule set's fields.
func NewRules(rs rulesv1alpha1.RuleSet, group string, versions []string) (*Rules, field.ErrorList) {
	c, errs := compileRules(rs, versions)
	if errs != nil {
		return nil, errs
	}
	return &Rules{group: group, c: c}, nil
}

// ConvertObject converts a decoded object (changed in place) to the
// apiVersion to.
func (r *Rules) ConvertObject(obj map[string]any, to string) error {
	av, _ := obj["apiVersion"].(string)
	if av == to {
		return nil
	}
	fromGroup, fromVersion, _ := strings.Cut(av, "/")
	toGroup, toVersion, _ := strings.Cut(to, "/")
	if fromGroup != r.group || toGroup != r.group {
		return fmt.Errorf("cannot convert %s to %s with the rules of group %s", av, to, r.group)
	}
	if err := r.c.convert(obj, fromVersion, toVersion); err != nil {
		return fmt.Errorf("converting %s to %s: %w", av, to, err)
	}
	obj["apiVersion"] = to
	return nil
}

// Convert implements Converter.
func (r *Rules) Convert(ctx context.Context, objs [][]byte, to string) (Result, error) {
	maps, err := r.convertDecoded(ctx, objs, to)
	if err != nil {
		return Result{}, err
	}
	res := unchanged(objs)
	for i, m := range maps {
		if m == nil {
			continue
		}
		out, err := json.Marshal(m)
		if err != nil {
			return Result{}, err
		}
		if res.Changed == nil {
			res.Objects = append([][]byte(nil), objs...)
			res.Changed = make([]bool, len(objs))
		}
		res.Objects[i], res.Changed[i] = out, true
	}
	return res, nil
}

// convertDecoded converts objs decoded: objects already in to are nil in
// the answer.
func (r *Rules) convertDecoded(_ context.Context, objs [][]byte, to string) ([]map[string]any, error) {
	out := make([]map[string]any, len(objs))
	for i, raw := range objs {
		if av, _, err := jsonraw.String(raw, "apiVersion"); err == nil && av == to {
			continue
		}
		obj, err := decodeObject(raw)
		if err != nil {
			return nil, err
		}
		if av, _ := obj["apiVersion"].(string); av == to {
			continue
		}
		if err := r.ConvertObject(obj, to); err != nil {
			return nil, fmt.Errorf("declarative conversion: %w", err)
		}
		out[i] = obj
	}
	return out, nil
}
