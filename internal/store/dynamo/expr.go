package dynamo

import (
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// upd builds an update expression with a condition, naming every attribute
// and value through placeholders.
type upd struct {
	sets, removes, adds, drops, conds []string
	names                             map[string]string
	values                            map[string]types.AttributeValue
	n                                 int
}

func newUpd() *upd {
	return &upd{names: map[string]string{}, values: map[string]types.AttributeValue{}}
}

// entry is the path of key k of map attribute m, for the methods of upd.
func entry(m, k string) string { return m + "\x00" + k }

// name returns the placeholder of attribute path p (an attribute, or an
// entry of a map attribute).
func (u *upd) name(p string) string {
	var parts []string
	for _, part := range strings.Split(p, "\x00") {
		ph := "#" + sanitize(part)
		if prev, ok := u.names[ph]; ok && prev != part {
			u.n++
			ph = fmt.Sprintf("#n%d", u.n)
		}
		u.names[ph] = part
		parts = append(parts, ph)
	}
	return strings.Join(parts, ".")
}

func sanitize(s string) string {
	var b strings.Builder
	for _, r := range s {
		if 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '_' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

func (u *upd) value(v types.AttributeValue) string {
	u.n++
	ph := fmt.Sprintf(":v%d", u.n)
	u.values[ph] = v
	return ph
}

func (u *upd) set(p string, v types.AttributeValue) *upd {
	u.sets = append(u.sets, u.name(p)+" = "+u.value(v))
	return u
}

// setExpr sets p to an expression in which "$" stands for p's placeholder
// and "?" for v's.
func (u *upd) setExpr(p, expr string, v types.AttributeValue) *upd {
	np := u.name(p)
	e := strings.ReplaceAll(expr, "$", np)
	if v != nil {
		e = strings.ReplaceAll(e, "?", u.value(v))
	}
	u.sets = append(u.sets, np+" = "+e)
	return u
}

// add adds delta to the number p (from 0 when p is absent).
func (u *upd) add(p string, delta int64) *upd {
	np := u.name(p)
	u.sets = append(u.sets, np+" = if_not_exists("+np+", "+u.value(n(0))+") + "+u.value(n(delta)))
	return u
}

func (u *upd) remove(p string) *upd {
	u.removes = append(u.removes, u.name(p))
	return u
}

// addToSet adds the elements of the set v to the set attribute p (ADD; p
// is created when absent).
func (u *upd) addToSet(p string, v types.AttributeValue) *upd {
	u.adds = append(u.adds, u.name(p)+" "+u.value(v))
	return u
}

// drop removes the elements of the set v from the set attribute p (DELETE;
// absent elements are no change, and an emptied set is removed).
func (u *upd) drop(p string, v types.AttributeValue) *upd {
	u.drops = append(u.drops, u.name(p)+" "+u.value(v))
	return u
}

// setOrRemove sets a binary attribute, or removes it for nil.
// apply lets f add clauses that depend on more than one value (see
// DB.leaseIndex), keeping the chain.
func (u *upd) apply(f func(*upd)) *upd {
	f(u)
	return u
}

func (u *upd) setOrRemove(p string, v []byte) *upd {
	if v == nil {
		return u.remove(p)
	}
	return u.set(p, b(v))
}

// cond adds a condition; "$" stands for the attribute p, "?" for v.
func (u *upd) cond(p, expr string, v types.AttributeValue) *upd {
	e := expr
	if p != "" {
		e = strings.ReplaceAll(e, "$", u.name(p))
	}
	if v != nil {
		e = strings.ReplaceAll(e, "?", u.value(v))
	}
	u.conds = append(u.conds, "("+e+")")
	return u
}

func (u *upd) updateExpr() *string {
	var parts []string
	if len(u.sets) > 0 {
		parts = append(parts, "SET "+strings.Join(u.sets, ", "))
	}
	if len(u.removes) > 0 {
		parts = append(parts, "REMOVE "+strings.Join(u.removes, ", "))
	}
	if len(u.adds) > 0 {
		parts = append(parts, "ADD "+strings.Join(u.adds, ", "))
	}
	if len(u.drops) > 0 {
		parts = append(parts, "DELETE "+strings.Join(u.drops, ", "))
	}
	return aws.String(strings.Join(parts, " "))
}

func (u *upd) condExpr() *string {
	if len(u.conds) == 0 {
		return nil
	}
	return aws.String(strings.Join(u.conds, " AND "))
}

func (u *upd) namesOrNil() map[string]string {
	if len(u.names) == 0 {
		return nil
	}
	return u.names
}

func (u *upd) valuesOrNil() map[string]types.AttributeValue {
	if len(u.values) == 0 {
		return nil
	}
	return u.values
}

// update is u as a transaction item on k in table.
func (u *upd) update(table string, k map[string]types.AttributeValue) types.TransactWriteItem {
	return types.TransactWriteItem{Update: &types.Update{
		TableName: aws.String(table), Key: k,
		UpdateExpression: u.updateExpr(), ConditionExpression: u.condExpr(),
		ExpressionAttributeNames: u.namesOrNil(), ExpressionAttributeValues: u.valuesOrNil(),
	}}
}

// check is u's condition as a transaction condition check on k.
func (u *upd) check(table string, k map[string]types.AttributeValue) types.TransactWriteItem {
	return types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{
		TableName: aws.String(table), Key: k, ConditionExpression: u.condExpr(),
		ExpressionAttributeNames: u.namesOrNil(), ExpressionAttributeValues: u.valuesOrNil(),
	}}
}

// del is a transaction delete of k with u's condition (if any).
func (u *upd) del(table string, k map[string]types.AttributeValue) types.TransactWriteItem {
	return types.TransactWriteItem{Delete: &types.Delete{
		TableName: aws.String(table), Key: k, ConditionExpression: u.condExpr(),
		ExpressionAttributeNames: u.namesOrNil(), ExpressionAttributeValues: u.valuesOrNil(),
	}}
}

// put is a transaction put of it with u's condition (if any).
func (u *upd) put(table string, it map[string]types.AttributeValue) types.TransactWriteItem {
	return types.TransactWriteItem{Put: &types.Put{
		TableName: aws.String(table), Item: it, ConditionExpression: u.condExpr(),
		ExpressionAttributeNames: u.namesOrNil(), ExpressionAttributeValues: u.valuesOrNil(),
	}}
}
