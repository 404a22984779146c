package dynamo

import (
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
