package meter

import (
	"bytes"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// ItemSize is the size of an item as DynamoDB counts it for read and write
// units (developer guide, "DynamoDB item sizes and formats"): the UTF-8
// length of each attribute name plus the size of its value, where
//
//   - a string is its UTF-8 length, a binary its raw length;
//   - a number is 1 byte per two significant digits plus 1 (leading and
//     trailing zeroes trimmed);
//   - a boolean or null is 1 byte;
//   - a list or map is 3 bytes plus its elements, each element 1 byte more
//     (a map's element also counts its key);
//   - a set is the sum of its members.
//
// A nil item (absent) has size 0.
func ItemSize(item map[string]types.AttributeValue) int {
	n := 0
	for name, v := range item {
		n += len(name) + valueSize(v)
	}
	return n
}

func valueSize(v types.AttributeValue) int {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value)
	case *types.AttributeValueMemberN:
		return numberSize(v.Value)
	case *types.AttributeValueMemberB:
		return len(v.Value)
	case *types.AttributeValueMemberBOOL, *types.AttributeValueMemberNULL:
		return 1
	case *types.AttributeValueMemberL:
		n := 3
		for _, e := range v.Value {
			n += 1 + valueSize(e)
		}
		return n
	case *types.AttributeValueMemberM:
		n := 3
		for k, e := range v.Value {
			n += 1 + len(k) + valueSize(e)
		}
		return n
	case *types.AttributeValueMemberSS:
		n := 0
		for _, s := range v.Value {
			n += len(s)
		}
		return n
	case *types.AttributeValueMemberNS:
		n := 0
		for _, s := range v.Value {
			n += numberSize(s)
		}
		return n
	case *types.AttributeValueMemberBS:
		n := 0
		for _, b := range v.Value {
			n += len(b)
		}
		return n
	}
	return 0
}

// numberSize: 1 byte per two significant digits, plus 1.
func numberSize(s string) int {
	s = strings.TrimLeft(s, "+-")
	mant, _, _ := strings.Cut(strings.ToLower(s), "e")
	digits := strings.Replace(mant, ".", "", 1)
	digits = strings.TrimLeft(digits, "0")
	digits = strings.TrimRight(digits, "0")
	if digits == "" || !utf8.ValidString(digits) {
		return 1
	}
	return int(math.Ceil(float64(len(digits))/2)) + 1
}

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
