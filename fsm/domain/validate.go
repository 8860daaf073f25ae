package domain

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Problem codes of spec validation. They are stable API (clients match on
// them), listed in docs/rpc.md.
const (
	CodeEmptyWorkflow     = "empty_workflow"
	CodeUnknownField      = "unknown_field"
	CodeBadJSON           = "bad_json"
	CodeMissingField      = "missing_field"
	CodeInvalidName       = "invalid_name"
	CodeDuplicateKey      = "duplicate_key"
	CodeUnknownDependency = "unknown_dependency"
	CodeSelfDependency    = "self_dependency"
	CodeDuplicateDep      = "duplicate_dependency"
	CodeCycle             = "cycle"
	CodeBadRetryPolicy    = "bad_retry_policy"
	CodeBadLease          = "bad_lease"
	CodeUnknownOnFailure  = "unknown_on_failure"
	CodeTooManyTasks      = "too_many_tasks"
	CodeInputTooLarge     = "input_too_large"
)

// Problem is one thing wrong with a spec, located by a path such as
// "tasks[2].deps[0]".
type Problem struct {
	Code    string `json:"code"`
	Path    string `json:"path"`
	Message string `json:"message"`
}

func (p Problem) String() string { return p.Path + ": " + p.Message + " (" + p.Code + ")" }

// ErrInvalidSpec is wrapped by every *SpecError.
var ErrInvalidSpec = errors.New("invalid workflow spec")

// SpecError lists every problem found in a spec.
type SpecError struct {
	Problems []Problem `json:"problems"`
}

func (e *SpecError) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.String()
	}
	return fmt.Sprintf("invalid workflow spec: %d problem(s): %s", len(e.Problems), strings.Join(parts, "; "))
}

// Unwrap makes errors.Is(err, ErrInvalidSpec) hold.
func (e *SpecError) Unwrap() error { return ErrInvalidSpec }

type problems []Problem

func (ps *problems) add(code, path, format string, args ...any) {
	*ps = append(*ps, Problem{Code: code, Path: path, Message: fmt.Sprintf(format, args...)})
}

func (ps problems) err() error {
	if len(ps) == 0 {
		return nil
	}
	return &SpecError{Problems: ps}
}

var (
	specFields = fields("name", "on_failure", "deadline_ms", "tasks")
	// specFieldsV2 are the spec fields of state-machine version 2, read by
	// the general path only (as taskFieldsV2).
	specFieldsV2 = fields("finally")
	taskFields   = fields("key", "type", "queue", "input", "deps", "retry", "lease_ms", "priority", "revert_type",
		"timeout_ms", "schedule_to_start_ms", "signal", "schedule_to_start_policy")
	// taskFieldsV2 are the task fields of state-machine version 2: the
	// general path reads them; the fast path (fastspec.go) does not know
	// them, so a spec using them is always parsed field by field.
	taskFieldsV2 = fields("when", "trigger", "duration_ms", "until", "for_each", "max_parallel", "definition", "spec")
	retryFields  = fields("max_attempts", "initial_backoff_ms", "max_backoff_ms", "multiplier")
)

// ParseSpec decodes a JSON workflow spec and validates it, returning every
// problem at once (unknown fields included) as a *SpecError.
func ParseSpec(raw []byte, lim Limits) (Spec, error) {
	if spec, ok := parseSpecFast(raw); ok { // fastspec.go
		return spec, ValidateSpec(spec, lim)
	}
	return parseSpecGeneral(raw, lim)
}

// parseSpecGeneral is ParseSpec through maps: every unknown field and
// wrong type is reported with its path.
func parseSpecGeneral(raw []byte, lim Limits) (Spec, error) {
	var ps problems
	spec, ok := parseSpecAt(&ps, "", raw)
	if !ok {
		return spec, ps.err()
	}
	if len(ps) > 0 {
		// Report structural problems together with semantic ones.
		ps = append(ps, validateSpec(spec, lim)...)
		return spec, ps.err()
	}
	return spec, ValidateSpec(spec, lim)
}

// parseSpecAt decodes the spec raw, its problems' paths under prefix ("" or
// an inline child spec's "tasks[0].spec."); false: raw is not an object.
func parseSpecAt(ps *problems, prefix string, raw []byte) (Spec, bool) {
	var spec Spec
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil || top == nil {
		where := "$"
		if prefix != "" {
			where = strings.TrimSuffix(prefix, ".")
		}
		ps.add(CodeBadJSON, where, "a workflow spec must be a JSON object: %v", errOrNull(err))
		return spec, false
	}
	ps.unknown(prefix, top, specFields, specFieldsV2)
	decodeField(ps, top, "name", prefix+"name", &spec.Name)
	decodeField(ps, top, "on_failure", prefix+"on_failure", &spec.OnFailure)
	decodeField(ps, top, "deadline_ms", prefix+"deadline_ms", &spec.DeadlineMS)
	var tasks []json.RawMessage
	decodeField(ps, top, "tasks", prefix+"tasks", &tasks)
	for i, rt := range tasks {
		spec.Tasks = append(spec.Tasks, parseTask(ps, fmt.Sprintf("%stasks[%d]", prefix, i), rt))
	}
	var finally []json.RawMessage
	decodeField(ps, top, "finally", prefix+"finally", &finally)
	for i, rt := range finally {
		spec.Finally = append(spec.Finally, parseTask(ps, fmt.Sprintf("%sfinally[%d]", prefix, i), rt))
	}
	return spec, true
}

// ParseTaskSpecs decodes a list of task specs (a spawn list), reporting
// unknown fields with paths under prefix (e.g. "spawn").
func ParseTaskSpecs(raw []json.RawMessage, prefix string) ([]TaskSpec, error) {
	var ps problems
	out := make([]TaskSpec, 0, len(raw))
	for i, rt := range raw {
		out = append(out, parseTask(&ps, fmt.Sprintf("%s[%d]", prefix, i), rt))
	}
	return out, ps.err()
}

func parseTask(ps *problems, path string, rt json.RawMessage) TaskSpec {
	var t TaskSpec
	var m map[string]json.RawMessage
	if err := json.Unmarshal(rt, &m); err != nil || m == nil {
		ps.add(CodeBadJSON, path, "a task must be a JSON object")
		return t
	}
	ps.unknown(path+".", m, taskFields, taskFieldsV2)
	decodeField(ps, m, "key", path+".key", &t.Key)
	decodeField(ps, m, "type", path+".type", &t.Type)
	decodeField(ps, m, "queue", path+".queue", &t.Queue)
	decodeField(ps, m, "deps", path+".deps", &t.Deps)
	decodeField(ps, m, "lease_ms", path+".lease_ms", &t.LeaseMS)
	decodeField(ps, m, "priority", path+".priority", &t.Priority)
	decodeField(ps, m, "revert_type", path+".revert_type", &t.RevertType)
	decodeField(ps, m, "timeout_ms", path+".timeout_ms", &t.TimeoutMS)
	decodeField(ps, m, "schedule_to_start_ms", path+".schedule_to_start_ms", &t.ScheduleToStartMS)
	decodeField(ps, m, "signal", path+".signal", &t.Signal)
	decodeField(ps, m, "schedule_to_start_policy", path+".schedule_to_start_policy", &t.ScheduleToStartPolicy)
	decodeField(ps, m, "when", path+".when", &t.When)
	decodeField(ps, m, "trigger", path+".trigger", &t.Trigger)
	decodeField(ps, m, "duration_ms", path+".duration_ms", &t.DurationMS)
	decodeField(ps, m, "until", path+".until", &t.Until)
	decodeField(ps, m, "for_each", path+".for_each", &t.ForEach)
	decodeField(ps, m, "max_parallel", path+".max_parallel", &t.MaxParallel)
	decodeField(ps, m, "definition", path+".definition", &t.Definition)
	if sp, ok := m["spec"]; ok && !bytes.Equal(bytes.TrimSpace(sp), []byte("null")) {
		inline, _ := parseSpecAt(ps, path+".spec.", sp)
		t.Spec = &inline
	}
	if in, ok := m["input"]; ok && !bytes.Equal(bytes.TrimSpace(in), []byte("null")) {
		t.Input = compact(in)
	}
	if rr, ok := m["retry"]; ok {
		var rm map[string]json.RawMessage
		if err := json.Unmarshal(rr, &rm); err != nil {
			ps.add(CodeBadRetryPolicy, path+".retry", "retry must be an object with max_attempts, initial_backoff_ms, max_backoff_ms, multiplier")
		} else if rm != nil {
			ps.unknown(path+".retry.", rm, retryFields)
			var r RetryPolicy
			decodeField(ps, rm, "max_attempts", path+".retry.max_attempts", &r.MaxAttempts)
			decodeField(ps, rm, "initial_backoff_ms", path+".retry.initial_backoff_ms", &r.InitialBackoffMS)
			decodeField(ps, rm, "max_backoff_ms", path+".retry.max_backoff_ms", &r.MaxBackoffMS)
			decodeField(ps, rm, "multiplier", path+".retry.multiplier", &r.Multiplier)
			t.Retry = &r
		}
	}
	return t
}

func (ps *problems) unknown(prefix string, m map[string]json.RawMessage, known ...map[string]bool) {
	keys := make([]string, 0, len(m))
	for k := range m {
		if !slices.ContainsFunc(known, func(kn map[string]bool) bool { return kn[k] }) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		if s := suggestField(k, known); s != "" {
			ps.add(CodeUnknownField, prefix+k, "unknown field %q; did you mean %q?", k, s)
			continue
		}
		ps.add(CodeUnknownField, prefix+k, "unknown field %q", k)
	}
}

func decodeField(ps *problems, m map[string]json.RawMessage, name, path string, dst any) {
	raw, ok := m[name]
	if !ok {
		return
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		code := CodeBadJSON
		if strings.Contains(path, ".retry.") {
			code = CodeBadRetryPolicy
		}
		ps.add(code, path, "wrong type: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
}

// ValidateSpec checks a decoded spec and returns every problem as a
// *SpecError, or nil.
func ValidateSpec(s Spec, lim Limits) error {
	return problems(validateSpec(s, lim)).err()
}

func validateSpec(s Spec, lim Limits) problems {
	var ps problems
	if s.Name != "" && (!ValidKey(s.Name) || len(s.Name) > lim.MaxKeyLen) {
		ps.add(CodeInvalidName, "name", "name %q must be 1-%d letters, digits, '_', '.', ':' or '-'", s.Name, lim.MaxKeyLen)
	}
	switch s.OnFailure {
	case "", OnFailureFail, OnFailureRevert:
	default:
		ps.add(CodeUnknownOnFailure, "on_failure", "on_failure %q is not one of %q, %q", s.OnFailure, OnFailureFail, OnFailureRevert)
	}
	if len(s.Tasks) == 0 {
		ps.add(CodeEmptyWorkflow, "tasks", "a workflow needs at least one task")
		return ps
	}
	if len(s.Tasks) > lim.MaxTasks {
		ps.add(CodeTooManyTasks, "tasks", "%d tasks exceed the limit of %d per run", len(s.Tasks), lim.MaxTasks)
	}
	if s.DeadlineMS < 0 || s.DeadlineMS > MaxTimeoutMS {
		ps.add(CodeBadTimeout, "deadline_ms", "deadline_ms %d must be between 1 and %d (0 means none)", s.DeadlineMS, MaxTimeoutMS)
	}
	ps = append(ps, validateTasks(s.Tasks, "tasks", nil, lim)...)
	ps = append(ps, validateFinally(s, lim)...)
	return ps
}

// ValidateSpawn checks children spawned into a run whose existing task keys
// are given: keys must be new, deps must name existing tasks or siblings, and
// the children must not form a cycle. Paths are under prefix ("spawn").
func ValidateSpawn(children []TaskSpec, existing map[string]bool, lim Limits) error {
	return validateTasks(children, "spawn", existing, lim).err()
}

func validateTasks(tasks []TaskSpec, prefix string, existing map[string]bool, lim Limits) problems {
	var ps problems
	index := make(map[string]int, len(tasks))
	for i, t := range tasks {
		path := fmt.Sprintf("%s[%d]", prefix, i)
		switch {
		case t.Key == "":
			ps.add(CodeMissingField, path+".key", "every task needs a key")
		case !ValidKey(t.Key) || len(t.Key) > lim.MaxKeyLen:
			ps.add(CodeInvalidName, path+".key", "key %q must be 1-%d letters, digits, '_', '.', ':' or '-'", t.Key, lim.MaxKeyLen)
		default:
			if j, dup := index[t.Key]; dup {
				ps.add(CodeDuplicateKey, path+".key", "key %q is already used by %s[%d]", t.Key, prefix, j)
			} else if existing[t.Key] {
				ps.add(CodeDuplicateKey, path+".key", "key %q is already used by a task of the run", t.Key)
			} else {
				index[t.Key] = i
			}
		}
		if t.Type == "" {
			ps.add(CodeMissingField, path+".type", "every task needs a type (the handler that runs it)")
		} else if !ValidKey(t.Type) || len(t.Type) > lim.MaxKeyLen {
			ps.add(CodeInvalidName, path+".type", "type %q must be 1-%d letters, digits, '_', '.', ':' or '-'", t.Type, lim.MaxKeyLen)
		}
		if t.Queue != "" && (!ValidKey(t.Queue) || len(t.Queue) > lim.MaxKeyLen) {
			ps.add(CodeInvalidName, path+".queue", "queue %q must be 1-%d letters, digits, '_', '.', ':' or '-'", t.Queue, lim.MaxKeyLen)
		}
		if t.RevertType != "" && (!ValidKey(t.RevertType) || len(t.RevertType) > lim.MaxKeyLen) {
			ps.add(CodeInvalidName, path+".revert_type", "revert_type %q must be 1-%d letters, digits, '_', '.', ':' or '-'", t.RevertType, lim.MaxKeyLen)
		}
		if len(t.Input) > lim.MaxInputBytes {
			ps.add(CodeInputTooLarge, path+".input", "input of %d bytes exceeds the limit of %d", len(t.Input), lim.MaxInputBytes)
		}
		if t.Input != nil && !json.Valid(t.Input) {
			ps.add(CodeBadJSON, path+".input", "input is not valid JSON")
		}
		if t.LeaseMS < 0 || t.LeaseMS > lim.MaxLeaseMS {
			ps.add(CodeBadLease, path+".lease_ms", "lease_ms %d must be between 1 and %d (0 means the default %d)", t.LeaseMS, lim.MaxLeaseMS, DefaultLeaseMS)
		} else if t.LeaseMS > 0 && t.LeaseMS < 100 {
			ps.add(CodeBadLease, path+".lease_ms", "lease_ms %d is below the minimum of 100", t.LeaseMS)
		}
		ps = append(ps, validateTimeouts(t, path, lim)...)
		ps = append(ps, validateDecisions(t, path, prefix)...)
		ps = append(ps, validateSleep(t, path, prefix)...)
		ps = append(ps, validateLoop(t, path, prefix)...)
		ps = append(ps, validateChild(t, path, prefix, lim)...)
		if r := t.Retry; r != nil {
			rp := path + ".retry"
			if r.MaxAttempts < 0 || r.MaxAttempts > lim.MaxAttempts {
				ps.add(CodeBadRetryPolicy, rp+".max_attempts", "max_attempts %d must be between 1 and %d (0 means the cluster's default: 1 unless settings default_max_attempts says otherwise)", r.MaxAttempts, lim.MaxAttempts)
			}
			if r.InitialBackoffMS < 0 || r.InitialBackoffMS > lim.MaxBackoffMS {
				ps.add(CodeBadRetryPolicy, rp+".initial_backoff_ms", "initial_backoff_ms %d must be between 0 and %d", r.InitialBackoffMS, lim.MaxBackoffMS)
			}
			if r.MaxBackoffMS < 0 || r.MaxBackoffMS > lim.MaxBackoffMS {
				ps.add(CodeBadRetryPolicy, rp+".max_backoff_ms", "max_backoff_ms %d must be between 0 and %d", r.MaxBackoffMS, lim.MaxBackoffMS)
			} else if r.MaxBackoffMS > 0 && r.MaxBackoffMS < r.InitialBackoffMS {
				ps.add(CodeBadRetryPolicy, rp+".max_backoff_ms", "max_backoff_ms %d is below initial_backoff_ms %d", r.MaxBackoffMS, r.InitialBackoffMS)
			}
			if r.Multiplier != 0 && (r.Multiplier < 1 || r.Multiplier > 10) {
				ps.add(CodeBadRetryPolicy, rp+".multiplier", "multiplier %g must be between 1 and 10", r.Multiplier)
			}
		}
	}
	for i, t := range tasks {
		seen := map[string]bool{}
		for j, d := range t.Deps {
			path := fmt.Sprintf("%s[%d].deps[%d]", prefix, i, j)
			switch {
			case d == t.Key && d != "":
				ps.add(CodeSelfDependency, path, "task %q depends on itself", t.Key)
			case seen[d]:
				ps.add(CodeDuplicateDep, path, "dependency %q is listed twice", d)
			default:
				if _, ok := index[d]; !ok && !existing[d] {
					ps.add(CodeUnknownDependency, path, "dependency %q is not a task of this workflow", d)
				}
			}
			seen[d] = true
		}
	}
	for _, cyc := range findCycles(tasks, index) {
		i := index[cyc[0]]
		ps.add(CodeCycle, fmt.Sprintf("%s[%d].deps", prefix, i), "dependency cycle: %s", strings.Join(append(cyc, cyc[0]), " -> "))
	}
	return ps
}

// findCycles returns one cycle per strongly connected component of more than
// one task, each starting at its smallest key, in a deterministic order.
func findCycles(tasks []TaskSpec, index map[string]int) [][]string {
	// Tarjan's algorithm over edges task -> dep.
	n := len(tasks)
	idx := make([]int, n)
	low := make([]int, n)
	on := make([]bool, n)
	for i := range idx {
		idx[i] = -1
	}
	var stack []int
	counter := 0
	var sccs [][]int
	var strong func(v int)
	strong = func(v int) {
		idx[v], low[v] = counter, counter
		counter++
		stack = append(stack, v)
		on[v] = true
		for _, d := range tasks[v].Deps {
			w, ok := index[d]
			if !ok || w == v || tasks[w].Key != d {
				continue
			}
			if idx[w] < 0 {
				strong(w)
				low[v] = min(low[v], low[w])
			} else if on[w] {
				low[v] = min(low[v], idx[w])
			}
		}
		if low[v] == idx[v] {
			var comp []int
			for {
				w := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				on[w] = false
				comp = append(comp, w)
				if w == v {
					break
				}
			}
			if len(comp) > 1 {
				sccs = append(sccs, comp)
			}
		}
	}
	for v := 0; v < n; v++ {
		if idx[v] < 0 && tasks[v].Key != "" && index[tasks[v].Key] == v {
			strong(v)
		}
	}
	var out [][]string
	for _, comp := range sccs {
		in := map[int]bool{}
		start := comp[0]
		for _, c := range comp {
			in[c] = true
			if tasks[c].Key < tasks[start].Key {
				start = c
			}
		}
		out = append(out, walkCycle(tasks, index, in, start))
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] })
	return out
}

// walkCycle finds a path inside one component from start back to start.
func walkCycle(tasks []TaskSpec, index map[string]int, in map[int]bool, start int) []string {
	// BFS from start's deps back to start, recording parents.
	parent := map[int]int{}
	queue := []int{}
	for _, d := range tasks[start].Deps {
		if w, ok := index[d]; ok && in[w] && w != start {
			if _, seen := parent[w]; !seen {
				parent[w] = start
				queue = append(queue, w)
			}
		}
	}
	for len(queue) > 0 {
		v := queue[0]
		queue = queue[1:]
		for _, d := range tasks[v].Deps {
			w, ok := index[d]
			if !ok || !in[w] {
				continue
			}
			if w == start {
				path := []string{tasks[v].Key}
				for p := parent[v]; p != start; p = parent[p] {
					path = append(path, tasks[p].Key)
				}
				path = append(path, tasks[start].Key)
				slices.Reverse(path)
				return path
			}
			if _, seen := parent[w]; !seen {
				parent[w] = v
				queue = append(queue, w)
			}
		}
	}
	return []string{tasks[start].Key}
}

func fields(names ...string) map[string]bool {
	out := make(map[string]bool, len(names))
	for _, n := range names {
		out[n] = true
	}
	return out
}

func compact(raw json.RawMessage) json.RawMessage {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return raw
	}
	return b.Bytes()
}

func errOrNull(err error) string {
	if err == nil {
		return "got null"
	}
	return err.Error()
}
