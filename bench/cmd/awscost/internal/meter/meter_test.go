package meter

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/stepgraph/stepgraph/internal/store/dynamo"
)

func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
func n(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }

func TestItemSize(t *testing.T) {
	for _, tc := range []struct {
		name string
		item map[string]types.AttributeValue
		want int
	}{
		{"absent", nil, 0},
		{"string", map[string]types.AttributeValue{"pk": s("abc")}, 2 + 3},
		{"utf-8 string", map[string]types.AttributeValue{"é": s("€")}, 2 + 3},
		{"number, 3 significant digits", map[string]types.AttributeValue{"n": n("123")}, 1 + 2 + 1},
		{"number, zeroes trimmed", map[string]types.AttributeValue{"n": n("-0.0100")}, 1 + 1 + 1},
		{"binary", map[string]types.AttributeValue{"b": &types.AttributeValueMemberB{Value: make([]byte, 10)}}, 1 + 10},
		{"bool and null", map[string]types.AttributeValue{"t": &types.AttributeValueMemberBOOL{Value: true},
			"z": &types.AttributeValueMemberNULL{Value: true}}, 2 + 2},
		{"map", map[string]types.AttributeValue{"m": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"a": s("x")}}},
			1 + 3 + (1 + 1 + 1)},
		{"list", map[string]types.AttributeValue{"l": &types.AttributeValueMemberL{Value: []types.AttributeValue{s("ab"), n("1")}}},
			1 + 3 + (1 + 2) + (1 + 2)},
		{"string set", map[string]types.AttributeValue{"ss": &types.AttributeValueMemberSS{Value: []string{"a", "bc"}}}, 2 + 3},
	} {
		if got := dynamo.ItemSize(tc.item); got != tc.want {
			t.Errorf("%s: ItemSize = %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestUnits(t *testing.T) {
	for _, tc := range []struct {
		bytes int
		want  float64
	}{{0, 1}, {1, 1}, {1024, 1}, {1025, 2}, {3000, 3}} {
		if got := WriteUnits(tc.bytes); got != tc.want {
			t.Errorf("WriteUnits(%d) = %v, want %v", tc.bytes, got, tc.want)
		}
	}
	for _, tc := range []struct {
		bytes      int
		consistent bool
		want       float64
	}{{0, true, 1}, {4096, true, 1}, {4097, true, 2}, {4096, false, 0.5}, {8193, false, 1.5}} {
		if got := ReadUnits(tc.bytes, tc.consistent); got != tc.want {
			t.Errorf("ReadUnits(%d, %v) = %v, want %v", tc.bytes, tc.consistent, got, tc.want)
		}
	}
}

func TestIndexWrite(t *testing.T) {
	ix := index{name: "queue", keys: []string{"qpk", "qsk"}}
	base := map[string]types.AttributeValue{"pk": s("T#1"), "sk": s("RUN#1"), "status": s("pending")}
	with := func(m map[string]types.AttributeValue, kv ...string) map[string]types.AttributeValue {
		out := map[string]types.AttributeValue{}
		for k, v := range m {
			out[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			out[kv[i]] = s(kv[i+1])
		}
		return out
	}
	queued := with(base, "qpk", "Q", "qsk", "001")
	big := with(queued, "blob", string(make([]byte, 1500)))
	for _, tc := range []struct {
		name          string
		before, after map[string]types.AttributeValue
		want          float64
	}{
		{"outside before and after", base, with(base, "status", "running"), 0},
		{"put outside the index", nil, base, 0},
		{"enters the index", base, queued, 1},
		{"put into the index", nil, queued, 1},
		{"leaves the index", queued, base, 1},
		{"deleted from the index", big, nil, 2},
		{"index key changes: delete and put", queued, with(queued, "qsk", "002"), 2},
		{"other attribute changes", queued, with(queued, "status", "running"), 1},
		{"other attribute grows past 1 KB", queued, big, 2},
		{"unchanged (a failed condition)", queued, queued, 0},
	} {
		if got := indexWrite(ix, tc.before, tc.after); got != tc.want {
			t.Errorf("%s: %v WRU, want %v", tc.name, got, tc.want)
		}
	}
}

// A keys-only index is written only when its keys change, and then with the
// keys' size, however large the item is.
func TestIndexWriteKeysOnly(t *testing.T) {
	ix := index{name: "org", keys: []string{"gpk", "gsk"}, keysOnly: []string{"pk", "sk", "gpk", "gsk"}}
	big := string(make([]byte, 50_000))
	thread := map[string]types.AttributeValue{"pk": s("T#1"), "sk": s("THREAD"), "gpk": s("ORG#o"), "gsk": s("001"), "values": s(big)}
	bumped := map[string]types.AttributeValue{"pk": s("T#1"), "sk": s("THREAD"), "gpk": s("ORG#o"), "gsk": s("001"), "values": s(big + "x")}
	for _, tc := range []struct {
		name          string
		before, after map[string]types.AttributeValue
		want          float64
	}{
		{"a 50 KB item enters: its keys only", nil, thread, 1},
		{"values change, keys do not", thread, bumped, 0},
		{"deleted", bumped, nil, 1},
	} {
		if got := indexWrite(ix, tc.before, tc.after); got != tc.want {
			t.Errorf("%s: %v WRU, want %v", tc.name, got, tc.want)
		}
	}
}

func TestPriceWrite(t *testing.T) {
	r := &Recorder{tables: map[string]table{"threads": {key: []string{"pk", "sk"},
		indexes: []index{{name: "org", keys: []string{"gpk", "gsk"}}}}}}
	small := map[string]types.AttributeValue{"pk": s("T#1"), "sk": s("THREAD"), "gpk": s("ORG#1"), "gsk": s("1")}
	grown := map[string]types.AttributeValue{"pk": s("T#1"), "sk": s("THREAD"), "gpk": s("ORG#1"), "gsk": s("1"),
		"values": s(string(make([]byte, 1100)))}
	for _, tc := range []struct {
		name      string
		w         write
		wru, iwru float64
	}{
		{"update that grows past 1 KB", write{table: "threads", kind: "update", before: small, after: grown}, 2, 2},
		{"the same in a transaction", write{table: "threads", kind: "update", transactional: true, before: small, after: grown}, 4, 2},
		{"delete of a large item", write{table: "threads", kind: "delete", before: grown}, 2, 2},
		{"condition check", write{table: "threads", kind: "check", transactional: true, before: small, after: small}, 2, 0},
		{"failed conditional put", write{table: "threads", kind: "put", before: small, after: small}, 1, 0},
	} {
		u := &Units{}
		r.priceWrite(u, &tc.w)
		if u.WRU != tc.wru || u.IndexWRU != tc.iwru {
			t.Errorf("%s: %v WRU + %v index WRU, want %v + %v", tc.name, u.WRU, u.IndexWRU, tc.wru, tc.iwru)
		}
	}
}

// Items read through the payload middleware come back resolved; those
// with a value that may have moved to S3 (1 KiB or more) are priced from
// the item as stored instead.
func TestMayHoldPointers(t *testing.T) {
	big := string(make([]byte, 1<<10))
	for _, tc := range []struct {
		name  string
		items []map[string]types.AttributeValue
		want  bool
	}{
		{"none", nil, false},
		{"small values", []map[string]types.AttributeValue{{"pk": s("T#a"), "v": s("x"), "n": n("1")}}, false},
		{"a string of 1 KiB", []map[string]types.AttributeValue{{"pk": s("a")}, {"v": s(big)}}, true},
		{"binary just under", []map[string]types.AttributeValue{{"b": &types.AttributeValueMemberB{Value: make([]byte, 1<<10-1)}}}, false},
		{"binary of 1 KiB", []map[string]types.AttributeValue{{"b": &types.AttributeValueMemberB{Value: make([]byte, 1<<10)}}}, true},
	} {
		if got := mayHoldPointers(tc.items...); got != tc.want {
			t.Errorf("%s: mayHoldPointers = %v, want %v", tc.name, got, tc.want)
		}
	}
}
