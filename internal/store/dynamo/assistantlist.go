package dynamo

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/stepgraph/stepgraph/internal/store"
)

// Listing entries: a page of SearchAssistants reads a page (review #10).
//
// Next to each assistant (sort key: its id) and its versions (V#…), the
// organization's partition holds one small entry per assistant whose sort
// key orders the assistants as searches return them, newest first:
// L#<created, 20 digits>#<insertion stamp>#<id>, with the assistant's id,
// graph and name (the filters a page can decide on the entry). A search
// queries the entries newest first (ScanIndexForward=false) with a Limit of
// what the page still needs, passes over the offset's assistants on their
// entries, and reads only the page's assistants by key (strongly
// consistent, as the entries); only a metadata filter reads an assistant
// to decide whether it matches. An entry's key never changes (an
// assistant's creation time and stamp are fixed) and its graph and name are
// written in the transaction that changes the assistant's, so the entries
// are exact; the assistant read for the page is checked again anyway, and
// one deleted since the query is skipped. A base-table range, not an index:
// its reads are strongly consistent (an SDK creates then searches), and it
// needs no change to the deployed tables.
//
// Organizations whose assistants were made before the entries existed get
// them once: the first search of such an organization (no marker item)
// reads the partition, puts each missing entry (on condition that none is
// there: an entry written since by an update is newer) and then the marker.
const (
	listPrefix   = "L#"
	listedMarker = "#LISTED" // not a UUID: no assistant has it as id
)

// listSK is the entry's sort key of assistant item it.
func listSK(it item) string {
	return fmt.Sprintf("%s%020d#%s#%s", listPrefix, it.num("created")+timeOffset, it.str("ins"), it.str("id"))
}

// listEntry is the entry of assistant item it with graph and name.
func listEntry(orgID string, it item, graph, name string) map[string]types.AttributeValue {
	return with(key(orgID, listSK(it)), map[string]types.AttributeValue{
		"id": s(it.str("id")), "graph": s(graph), "name": s(name),
	})
}

// putListEntry is the transaction put of it's entry with graph and name.
func (db *DB) putListEntry(orgID string, it item, graph, name string) types.TransactWriteItem {
	return types.TransactWriteItem{Put: &types.Put{TableName: aws.String(db.tables.assistants),
		Item: listEntry(orgID, it, graph, name)}}
}

// delListEntry is the transaction delete of it's entry.
func (db *DB) delListEntry(orgID string, it item) types.TransactWriteItem {
	return types.TransactWriteItem{Delete: &types.Delete{TableName: aws.String(db.tables.assistants),
		Key: key(orgID, listSK(it))}}
}

// isAssistantSK says whether a sort key of the partition is an assistant's.
func isAssistantSK(sk string) bool {
	return !strings.HasPrefix(sk, versionPrefix) && !strings.HasPrefix(sk, listPrefix) && sk != listedMarker
}

// ensureListed makes the entries of an organization whose assistants
// predate them (once; known-listed organizations are remembered).
func (db *DB) ensureListed(ctx context.Context, orgID string) error {
	if _, ok := db.listed.Load(orgID); ok {
		return nil
	}
	m, err := db.get(ctx, db.tables.assistants, key(orgID, listedMarker))
	if err != nil {
		return err
	}
	if m == nil {
		items, err := db.queryPartition(ctx, db.tables.assistants, orgID, "")
		if err != nil {
			return err
		}
		for _, it := range items {
			if !isAssistantSK(it.str("sk")) {
				continue
			}
			_, err := db.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(db.tables.assistants),
				Item: listEntry(orgID, it, it.str("graph"), it.str("name")), ConditionExpression: aws.String(notExists)})
			if err != nil && !isCondFailed(err) {
				return err
			}
		}
		if _, err := db.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(db.tables.assistants),
			Item: key(orgID, listedMarker)}); err != nil {
			return err
		}
	}
	db.listed.Store(orgID, true)
	return nil
}

// listQuery reads an organization's entries, newest first.
func (db *DB) listQuery(orgID string) *dynamodb.QueryInput {
	return &dynamodb.QueryInput{
		TableName: aws.String(db.tables.assistants), ConsistentRead: aws.Bool(true),
		KeyConditionExpression: aws.String("pk = :pk AND begins_with(sk, :p)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": s(orgID), ":p": s(listPrefix),
		},
		ScanIndexForward: aws.Bool(false),
	}
}

// matchAssistants visits, newest first, the assistants matching f after
// skipping skip of them, until visit answers false; want > 0 is how many
// the caller will visit at most (the query reads no more entries than
// that needs, without a filter). With needItem false (a count without a
// metadata filter) the entries alone decide and visit gets nil.
func (db *DB) matchAssistants(ctx context.Context, orgID string, f store.AssistantFilter, skip, want int, needItem bool, visit func(item) bool) error {
	meta, err := parseFilter("metadata", f.Metadata)
	if err != nil {
		return err
	}
	if orgID == "" {
		return nil
	}
	if err := db.ensureListed(ctx, orgID); err != nil {
		return err
	}
	onEntry := func(e item) bool {
		return (f.GraphID == "" || e.str("graph") == f.GraphID) &&
			(f.NameContains == "" || strings.Contains(e.str("name"), f.NameContains))
	}
	filtered := f.GraphID != "" || f.NameContains != "" || meta != nil
	in := db.listQuery(orgID)
	visited := 0
	for {
		in.Limit = aws.Int32(searchPage(want, skip, visited, filtered))
		pg, err := db.client.Query(ctx, in)
		if err != nil {
			return err
		}
		for _, raw := range pg.Items {
			e := item(raw)
			if !onEntry(e) {
				continue
			}
			if meta == nil && (skip > 0 || !needItem) {
				// The entry decides: the assistant is not read.
				if skip > 0 {
					skip--
					continue
				}
				visited++
				if !visit(nil) {
					return nil
				}
				continue
			}
			it, err := db.get(ctx, db.tables.assistants, key(orgID, e.str("id")))
			if err != nil {
				return err
			}
			if it == nil || listSK(it) != e.str("sk") || !onEntry(it) || !meta.Matches(it.bytes("metadata")) {
				continue // deleted (or made again) since the query, or no match
			}
			if skip > 0 {
				skip--
				continue
			}
			visited++
			if !visit(it) {
				return nil
			}
		}
		if len(pg.LastEvaluatedKey) == 0 {
			return nil
		}
		in.ExclusiveStartKey = pg.LastEvaluatedKey
	}
}
