package stack

import (
	"fmt"
	"reflect"
	"slices"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/jsii-runtime-go"

	"github.com/stepgraph/stepgraph/internal/store/dynamo"
)

// TTLAttribute is the attribute DynamoDB expires items by, on the tables of
// TTLTables (internal/store/dynamo: ttlAttribute and CreateTables).
const TTLAttribute = "ttl"

// TTLTables are the tables (names without the prefix) with TTL enabled.
var TTLTables = []string{dynamo.TableIdempotency, dynamo.TableThreads}

// Table is one declared table: its CreateTable input (the source of truth)
// and its CloudFormation resource.
type Table struct {
	Name  string // without the prefix, e.g. "threads"
	Input *dynamodb.CreateTableInput
	Cfn   awsdynamodb.CfnTable
}

// newTables declares every table of dynamo.TableDefinitions(prefix), field
// for field. A field of the input this translation does not know (a local
// index, a stream, provisioned throughput, ...) fails the synth instead of
// being dropped.
func newTables(s awscdk.Stack, prefix string, removal awscdk.RemovalPolicy) ([]Table, error) {
	var out []Table
	for _, in := range dynamo.TableDefinitionsFor(dynamo.DeployedOptions(prefix)) {
		if err := onlyFields(in, "TableName", "BillingMode", "AttributeDefinitions", "KeySchema", "GlobalSecondaryIndexes"); err != nil {
			return nil, fmt.Errorf("table %s: %w", aws.ToString(in.TableName), err)
		}
		full := aws.ToString(in.TableName)
		if len(full) <= len(prefix) || full[:len(prefix)] != prefix {
			return nil, fmt.Errorf("table %s: not under the prefix %q", full, prefix)
		}
		name := full[len(prefix):]
		props := &awsdynamodb.CfnTableProps{
			TableName:            jsii.String(full),
			BillingMode:          jsii.String(string(in.BillingMode)),
			AttributeDefinitions: attributeDefinitions(in.AttributeDefinitions),
			KeySchema:            keySchema(in.KeySchema),
			PointInTimeRecoverySpecification: &awsdynamodb.CfnTable_PointInTimeRecoverySpecificationProperty{
				PointInTimeRecoveryEnabled: jsii.Bool(true),
			},
		}
		if in.BillingMode != types.BillingModePayPerRequest {
			return nil, fmt.Errorf("table %s: billing mode %q, want PAY_PER_REQUEST", full, in.BillingMode)
		}
		var gsis []any
		for _, g := range in.GlobalSecondaryIndexes {
			if err := onlyFields(g, "IndexName", "KeySchema", "Projection"); err != nil {
				return nil, fmt.Errorf("table %s index %s: %w", full, aws.ToString(g.IndexName), err)
			}
			proj := &awsdynamodb.CfnTable_ProjectionProperty{}
			if g.Projection != nil {
				proj.ProjectionType = jsii.String(string(g.Projection.ProjectionType))
				if len(g.Projection.NonKeyAttributes) > 0 {
					proj.NonKeyAttributes = jsii.Strings(g.Projection.NonKeyAttributes...)
				}
			}
			gsis = append(gsis, &awsdynamodb.CfnTable_GlobalSecondaryIndexProperty{
				IndexName:  jsii.String(aws.ToString(g.IndexName)),
				KeySchema:  keySchema(g.KeySchema),
				Projection: proj,
			})
		}
		if len(gsis) > 0 {
			props.GlobalSecondaryIndexes = gsis
		}
		if slices.Contains(TTLTables, name) {
			props.TimeToLiveSpecification = &awsdynamodb.CfnTable_TimeToLiveSpecificationProperty{
				AttributeName: jsii.String(TTLAttribute),
				Enabled:       jsii.Bool(true),
			}
		}
		t := awsdynamodb.NewCfnTable(s, jsii.String("Table-"+name), props)
		t.ApplyRemovalPolicy(removal, nil)
		out = append(out, Table{Name: name, Input: in, Cfn: t})
	}
	for _, name := range TTLTables {
		if !slices.ContainsFunc(out, func(t Table) bool { return t.Name == name }) {
			return nil, fmt.Errorf("TTL table %s is not among dynamo.TableDefinitions", name)
		}
	}
	return out, nil
}

func attributeDefinitions(in []types.AttributeDefinition) []any {
	var out []any
	for _, a := range in {
		out = append(out, &awsdynamodb.CfnTable_AttributeDefinitionProperty{
			AttributeName: jsii.String(aws.ToString(a.AttributeName)),
			AttributeType: jsii.String(string(a.AttributeType)),
		})
	}
	return out
}

func keySchema(in []types.KeySchemaElement) []any {
	var out []any
	for _, k := range in {
		out = append(out, &awsdynamodb.CfnTable_KeySchemaProperty{
			AttributeName: jsii.String(aws.ToString(k.AttributeName)),
			KeyType:       jsii.String(string(k.KeyType)),
		})
	}
	return out
}

// onlyFields fails when a field of the struct v points to, other than the
// named ones, is set.
func onlyFields(v any, names ...string) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Pointer {
		rv = rv.Elem()
	}
	rt := rv.Type()
	for i := range rt.NumField() {
		f := rt.Field(i)
		if !f.IsExported() || slices.Contains(names, f.Name) {
			continue
		}
		if !rv.Field(i).IsZero() {
			return fmt.Errorf("field %s is set but infra/stack does not translate it to CloudFormation", f.Name)
		}
	}
	return nil
}
