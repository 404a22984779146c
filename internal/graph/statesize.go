package graph

import "maps"

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
// they write.
func (g *Graph) applyTo(cp *Checkpoint, ws Writes) *Error {
	for _, w := range ws {
		delete(cp.sizes, w.Key)
	}
	return g.applyWrites(cp.Values, ws)
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
