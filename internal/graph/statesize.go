package graph

import (
	"encoding/json"
	"maps"
	"reflect"
)

// channelSizes remembers, per channel of a checkpoint's Values, the JSON
// size of its member ("key":value), so that the state-size limit measures
// after a step only the channels the step wrote: a conversation's state
// grows with every turn, and walking all of it after every step made a
// step's cost grow with the state (issue 19). A checkpoint's Values change
// only through applyTo, which forgets the channels written; clone and child
// copy the sizes with the values. A checkpoint decoded from JSON has none
// and is measured whole once.
type channelSizes map[string]int

// applyTo applies ws to cp's values, forgetting the sizes of the channels
// they write, except a list that the writes only extended (an append, a
// conversation's messages): its size grows by its new elements' alone.
func (g *Graph) applyTo(cp *Checkpoint, ws Writes) *Error {
	type known struct {
		value any
		size  int
	}
	var before map[string]known
	for _, w := range ws {
		if size, ok := cp.sizes[w.Key]; ok {
			if before == nil {
				before = map[string]known{}
			}
			before[w.Key] = known{cp.Values[w.Key], size}
			delete(cp.sizes, w.Key)
		}
	}
	if e := g.applyWrites(cp.Values, ws); e != nil {
		return e
	}
	for k, was := range before {
		if size, ok := extendedSize(was.value, cp.Values[k], was.size); ok {
			cp.sizes[k] = size
		}
	}
	return nil
}

// extendedSize is the size of the member holding list now when it is list
// was (of member size size) with elements added at its end, the same
// values (not copies: state values are never changed in place) before them.
func extendedSize(was, now any, size int) (int, bool) {
	old, ok := was.([]any)
	list, ok2 := now.([]any)
	if !ok || !ok2 || len(list) < len(old) {
		return 0, false
	}
	for i := range old {
		if !sameValue(old[i], list[i]) {
			return 0, false
		}
	}
	for i := len(old); i < len(list); i++ {
		m := sizer{}
		m.add(list[i])
		size += m.n
		if i > 0 {
			size++ // the comma
		}
	}
	return size, true
}

// sameValue reports whether a and b are the same state value: the same
// object or list (by reference), or equal scalars.
func sameValue(a, b any) bool {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		return ok && reflect.ValueOf(x).UnsafePointer() == reflect.ValueOf(y).UnsafePointer()
	case []any:
		y, ok := b.([]any)
		return ok && len(x) == len(y) && (len(x) == 0 || &x[0] == &y[0])
	case nil, bool, string, json.Number:
		return a == b
	}
	return false
}

// stateSize is jsonSize(cp.Values, max), measuring only the channels whose
// size cp does not know yet and remembering those it measured whole.
func (cp *Checkpoint) stateSize(max int) int {
	if cp.sizes == nil {
		cp.sizes = channelSizes{}
	}
	n := 2 + max0(len(cp.Values)-1) // braces and commas
	if max > 0 && n > max {
		return n
	}
	for k, v := range cp.Values {
		size, ok := cp.sizes[k]
		if !ok {
			m := sizer{max: max - n}
			m.n = stringSize(k) + 1
			if m.add(v); m.over() {
				return n + m.n
			}
			size = m.n
			cp.sizes[k] = size
		}
		if n += size; max > 0 && n > max {
			return n
		}
	}
	return n
}

func max0(n int) int { return max(n, 0) }

// copySizes is the sizes of a copy of a checkpoint's values.
func (s channelSizes) copySizes() channelSizes { return maps.Clone(s) }
