package check

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/anishathalye/porcupine"
)

// The model of one object, for porcupine: its state is the
// resourceVersion of its current state, 0 while it does not exist.

type lInput struct {
	Op    int // index in History.Ops
	Kind  OpKind
	IfRev int64
}

type lOutput struct {
	Outcome Outcome
	Rev     int64 // the state a successful write made or a read returned
}

// objectModel is Kubernetes' contract for one object: a create succeeds
// only if it is absent, an update or delete with a resourceVersion only if
// it matches (a conflict if not, not found if absent), a merge patch only
// if it exists, a forced apply always, and a read returns the last write.
// A write's new resourceVersion is newer than the one it replaced. A
// delete whose answer was lost may or may not have happened.
var objectModel = porcupine.NondeterministicModel{
	Init: func() []any { return []any{int64(0)} },
	Step: func(state, input, output any) []any {
		s, in, out := state.(int64), input.(lInput), output.(lOutput)
		return step(s, in, out)
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(lInput), output.(lOutput)
		s := string(in.Kind)
		if in.IfRev != 0 {
			s += fmt.Sprintf("(rv=%d)", in.IfRev)
		}
		s += " → " + string(out.Outcome)
		if out.Rev != 0 {
			s += fmt.Sprintf(" %d", out.Rev)
		}
		return s
	},
	DescribeState: func(state any) string {
		if s := state.(int64); s != 0 {
			return fmt.Sprintf("rv %d", s)
		}
		return "absent"
	},
}

func step(s int64, in lInput, out lOutput) []any {
	exists := s != 0
	one := func(ok bool, next int64) []any {
		if ok {
			return []any{next}
		}
		return nil
	}
	written := exists && out.Rev > s || !exists && out.Rev > 0
	switch in.Kind {
	case Create:
		switch out.Outcome {
		case OK:
			return one(!exists && written, out.Rev)
		case AlreadyExists:
			return one(exists, s)
		}
	case Update:
		switch out.Outcome {
		case OK:
			return one(exists && s == in.IfRev && written, out.Rev)
		case Conflict:
			return one(exists && s != in.IfRev, s)
		case NotFound:
			return one(!exists, s)
		}
	case Patch:
		switch out.Outcome {
		case OK:
			return one(exists && written, out.Rev)
		case NotFound:
			return one(!exists, s)
		case Conflict:
			return one(true, s)
		}
	case Apply:
		switch out.Outcome {
		case OK:
			return one(written, out.Rev)
		case Conflict:
			return one(true, s)
		}
	case Delete:
		switch out.Outcome {
		case OK:
			return one(exists && s == in.IfRev, 0)
		case Conflict:
			return one(exists && s != in.IfRev, s)
		case NotFound:
			return one(!exists, s)
		case Unknown:
			if exists && s == in.IfRev {
				return []any{s, int64(0)}
			}
			return []any{s}
		}
	case Get:
		switch out.Outcome {
		case OK:
			return one(s == out.Rev && exists, s)
		case NotFound:
			return one(!exists, s)
		}
	}
	return nil
}

// checkLinearizable checks each object's history with porcupine. A write
// whose answer was lost is resolved from the truth: etcd holds its write
// ID (it happened, at that revision, some time after it was sent) or not
// (it did not happen, and is left out). It returns how many were resolved
// as having happened.
func checkLinearizable(h *History, t *Truth, o Options, rp *reporter) int {
	end := int64(0)
	for i := range h.Ops {
		end = max(end, h.Ops[i].Return, h.Ops[i].Call)
	}
	// An operation whose answer was lost returns after everything else:
	// it may take effect at any time after it was sent.
	never := end + 1
	byKey := map[string][]porcupine.Operation{}
	resolved := 0
	for i := range h.Ops {
		op := &h.Ops[i]
		in := lInput{Op: i, Kind: op.Kind, IfRev: op.IfRev}
		var out lOutput
		ret := op.Return
		switch oc := op.Outcome(); {
		case op.Kind == GetStale || oc == Refused:
			continue
		case oc == Unknown && op.Kind == Get:
			continue // a read without an answer says nothing
		case oc == Unknown && op.Kind == Delete:
			// A guarded delete applies only as the next change after the
			// state it names: if etcd's is not a deletion, it did not.
			if v, ok := t.After(op.Key, op.IfRev); !ok || !v.Deleted {
				continue
			}
			out, ret = lOutput{Outcome: Unknown}, never
		case oc == Unknown:
			c, ok := t.Written(op.WriteID)
			if !ok || c.Key != op.Key {
				continue // it never happened
			}
			out, ret = lOutput{Outcome: OK, Rev: c.Rev}, never
			resolved++
		case oc == OK && op.Kind != Delete:
			if op.Obj == nil {
				continue // reported by checkAcknowledged
			}
			out = lOutput{Outcome: OK, Rev: op.Obj.Rev}
		default:
			out = lOutput{Outcome: oc}
		}
		byKey[op.Key] = append(byKey[op.Key], porcupine.Operation{
			ClientId: op.Client, Input: in, Call: op.Call, Output: out, Return: ret,
		})
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		ops := byKey[k]
		m := objectModel
		initial := int64(0)
		if v, ok := t.At(k, t.Start); ok {
			initial = v.Rev
		}
		m.Init = func() []any { return []any{initial} }
		model := m.ToModel()
		res, info := porcupine.CheckOperationsVerbose(model, ops, o.Timeout)
		switch res {
		case porcupine.Ok:
			continue
		case porcupine.Unknown:
			rp.add(Linearizable, "%s: the check of its %d operations timed out after %v", k, len(ops), o.Timeout)
		default:
			rp.add(Linearizable, "%s: its %d operations are not linearizable%s", k, len(ops), longestPrefix(h, info))
		}
		if o.VisualizeDir != "" {
			path := filepath.Join(o.VisualizeDir, "linearizability-"+strings.NewReplacer("/", "_").Replace(k)+".html")
			if err := os.MkdirAll(o.VisualizeDir, 0o755); err == nil {
				if err := porcupine.VisualizePath(model, info, path); err == nil {
					if rp.r.Visualizations == nil {
						rp.r.Visualizations = map[string]string{}
					}
					rp.r.Visualizations[k] = path
				}
			}
		}
	}
	return resolved
}

// longestPrefix describes where the longest linearization found stops:
// the operations that could not be placed after it.
func longestPrefix(h *History, info porcupine.LinearizationInfo) string {
	parts := info.PartialLinearizationsOperations()
	if len(parts) == 0 || len(parts[0]) == 0 {
		return ""
	}
	longest := parts[0][0]
	for _, p := range parts[0] {
		if len(p) > len(longest) {
			longest = p
		}
	}
	placed := map[int]bool{}
	for _, op := range longest {
		placed[op.Input.(lInput).Op] = true
	}
	var last string
	if n := len(longest); n > 0 {
		last = h.Ops[longest[n-1].Input.(lInput).Op].String()
	}
	return fmt.Sprintf(" (the longest linearization orders %d of them, the last %s)", len(longest), last)
}
