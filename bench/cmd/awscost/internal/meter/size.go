package meter

import (
	"bytes"
	"math"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// WriteUnits is what writing an item of n bytes costs: 1 per started KB,
// at least 1.
func WriteUnits(n int) float64 { return math.Max(1, math.Ceil(float64(n)/1024)) }

// ReadUnits is what a strongly consistent read of n bytes (one item, or the
// sum of the items a Query page read) costs: 1 per started 4 KB, at least 1;
// half that for an eventually consistent read.
func ReadUnits(n int, consistent bool) float64 {
	u := math.Max(1, math.Ceil(float64(n)/4096))
	if !consistent {
		u /= 2
	}
	return u
}

// Equal reports whether two items hold the same attributes and values.
func Equal(a, b map[string]types.AttributeValue) bool {
	if len(a) != len(b) || (a == nil) != (b == nil) {
		return false
	}
	for k, va := range a {
		vb, ok := b[k]
		if !ok || !valueEqual(va, vb) {
			return false
		}
	}
	return true
}

func valueEqual(a, b types.AttributeValue) bool {
	switch a := a.(type) {
	case *types.AttributeValueMemberS:
		b, ok := b.(*types.AttributeValueMemberS)
		return ok && a.Value == b.Value
	case *types.AttributeValueMemberN:
		b, ok := b.(*types.AttributeValueMemberN)
		return ok && a.Value == b.Value
	case *types.AttributeValueMemberB:
		b, ok := b.(*types.AttributeValueMemberB)
		return ok && bytes.Equal(a.Value, b.Value)
	case *types.AttributeValueMemberBOOL:
		b, ok := b.(*types.AttributeValueMemberBOOL)
		return ok && a.Value == b.Value
	case *types.AttributeValueMemberNULL:
		_, ok := b.(*types.AttributeValueMemberNULL)
		return ok
	case *types.AttributeValueMemberL:
		b, ok := b.(*types.AttributeValueMemberL)
		if !ok || len(a.Value) != len(b.Value) {
			return false
		}
		for i := range a.Value {
			if !valueEqual(a.Value[i], b.Value[i]) {
				return false
			}
		}
		return true
	case *types.AttributeValueMemberM:
		b, ok := b.(*types.AttributeValueMemberM)
		return ok && Equal(a.Value, b.Value)
	case *types.AttributeValueMemberSS:
		b, ok := b.(*types.AttributeValueMemberSS)
		return ok && sameStrings(a.Value, b.Value)
	case *types.AttributeValueMemberNS:
		b, ok := b.(*types.AttributeValueMemberNS)
		return ok && sameStrings(a.Value, b.Value)
	case *types.AttributeValueMemberBS:
		b, ok := b.(*types.AttributeValueMemberBS)
		if !ok || len(a.Value) != len(b.Value) {
			return false
		}
		seen := map[string]int{}
		for _, v := range a.Value {
			seen[string(v)]++
		}
		for _, v := range b.Value {
			seen[string(v)]--
		}
		for _, c := range seen {
			if c != 0 {
				return false
			}
		}
		return true
	}
	return false
}

func sameStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	seen := map[string]int{}
	for _, v := range a {
		seen[v]++
	}
	for _, v := range b {
		seen[v]--
	}
	for _, c := range seen {
		if c != 0 {
			return false
		}
	}
	return true
}
