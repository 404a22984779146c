package graph

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
)

// decodeJSON decodes with UseNumber so numbers keep their exact text; every
// decoder in this package goes through it, or a round trip would turn
// json.Number into float64.
func decodeJSON(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	return dec.Decode(v)
}

// normalize converts any JSON-encodable value to the canonical state shape
// (see the package doc), so values written by Go code (ints, structs, typed
// slices) and values read back from a checkpoint are indistinguishable.
func normalize(v any) (any, error) {
	switch v.(type) {
	case nil, bool, string:
		return v, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out any
	err = decodeJSON(b, &out)
	return out, err
}

// cloneValue deep-copies a normalized value, so a node can mutate its state
// copy without racing other nodes or altering the checkpoint.
func cloneValue(v any) any {
	switch t := v.(type) {
	case map[string]any:
		return cloneMap(t)
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = cloneValue(x)
		}
		return out
	default:
		return v
	}
}

func cloneMap(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, x := range m {
		out[k] = cloneValue(x)
	}
	return out
}

// Float reads a state number (json.Number, or any Go numeric type).
func Float(v any) (float64, bool) {
	switch n := v.(type) {
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	case float64:
		return n, true
	case float32:
		return float64(n), true
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	case int32:
		return float64(n), true
	}
	return 0, false
}

// Int reads a state number that is an integer.
func Int(v any) (int64, bool) {
	switch n := v.(type) {
	case json.Number:
		if i, err := n.Int64(); err == nil {
			return i, true
		}
	case int:
		return int64(n), true
	case int64:
		return n, true
	case int32:
		return int64(n), true
	}
	f, ok := Float(v)
	if !ok || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, false
	}
	return int64(f), true
}

// addNumbers sums two normalized numbers, exactly when both are integers.
func addNumbers(a, b json.Number) (json.Number, error) {
	x, errX := a.Int64()
	y, errY := b.Int64()
	if errX == nil && errY == nil {
		if s := x + y; (s > x) == (y > 0) {
			return json.Number(strconv.FormatInt(s, 10)), nil
		}
	}
	fx, err := a.Float64()
	if err != nil {
		return "", err
	}
	fy, err := b.Float64()
	if err != nil {
		return "", err
	}
	// Format the way encoding/json does, so 2.0 reads back as "2".
	out, err := json.Marshal(fx + fy)
	return json.Number(out), err
}
