package stack

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/jsii-runtime-go"

	"github.com/stepgraph/stepgraph/internal/store/dynamo"
)

// EnvPayloadBucket is the payload store's bucket
// (internal/lambdaapp.EnvPayloadBucket), given to every function that
// reaches a table.
const EnvPayloadBucket = "STEPGRAPH_PAYLOAD_BUCKET"

// PayloadActions are the S3 actions of each access to the payload bucket.
// A function's access follows its tables (Grants.PayloadAccess): the
// DynamoDB adapter reads a pointer's object wherever it reads an item, and
// writes (and deletes: prefixes are listed first) wherever it writes one.
var PayloadActions = map[string][]string{
	AccessRead:  {"s3:GetObject"},
	AccessWrite: {"s3:GetObject", "s3:PutObject", "s3:DeleteObject"},
}

// PayloadAccess is the access a function with grants g has to the payload
// bucket: write when it writes any table, read when it reads one, none
// otherwise.
func (g Grants) PayloadAccess() string {
	access := ""
	for _, a := range g.Tables {
		if a == AccessWrite {
			return AccessWrite
		}
		access = AccessRead
	}
	return access
}

// newPayloadBucket is the payload store (docs/aws.md, "Sizes"): encrypted
// with S3-managed keys, no public access of any kind, TLS only, and a
// lifecycle rule that deletes the payloads of expiring items (temporary
// results, event logs: the adapter's prefix "x/") some days after their
// items' TTL; the other payloads go with their records (a deleted thread
// deletes its partition's payloads). Its name is generated: a retained
// bucket of a failed first deploy does not block the next.
func newPayloadBucket(s awscdk.Stack, removal awscdk.RemovalPolicy) awss3.Bucket {
	return awss3.NewBucket(s, jsii.String("Payloads"), &awss3.BucketProps{
		Encryption:        awss3.BucketEncryption_S3_MANAGED,
		BlockPublicAccess: awss3.BlockPublicAccess_BLOCK_ALL(),
		EnforceSSL:        jsii.Bool(true),
		ObjectOwnership:   awss3.ObjectOwnership_BUCKET_OWNER_ENFORCED,
		RemovalPolicy:     removal,
		LifecycleRules: &[]*awss3.LifecycleRule{
			{
				Id:         jsii.String("expiring-payloads"),
				Prefix:     jsii.String(dynamo.ExpiringPrefix),
				Expiration: awscdk.Duration_Days(jsii.Number(dynamo.ExpiringPrefixDays)),
			},
			{
				Id:                                  jsii.String("abort-incomplete-uploads"),
				AbortIncompleteMultipartUploadAfter: awscdk.Duration_Days(jsii.Number(1)),
			},
		},
	})
}
