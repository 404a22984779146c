package runs

import "testing"

// median is upstream's (runtime_inmem ops.py Runs.stats): the middle wait,
// or the mean of the middle two.
func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		sorted []float64
		want   float64
	}{
		{[]float64{4}, 4},
		{[]float64{1, 3}, 2},
		{[]float64{1, 2, 9}, 2},
		{[]float64{1, 2, 3, 10}, 2.5},
	} {
		if got := median(tc.sorted); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.sorted, got, tc.want)
		}
	}
}
