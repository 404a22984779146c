package lambdaruntime

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"
)

// TagKey tags every runtime function with the name prefix of the stage that
// made it. Names alone cannot tell stages apart: stage "dev"'s runtimes
// begin "stepgraph-dev-rt-", and so would any function of a stage named
// "dev-rt"; the tag's exact value can.
const TagKey = "stepgraph:prefix"

// TeardownAPI is the part of the Lambda API DeleteRuntimes uses;
// *lambda.Client implements it.
type TeardownAPI interface {
	ListFunctions(ctx context.Context, in *lambda.ListFunctionsInput, optFns ...func(*lambda.Options)) (*lambda.ListFunctionsOutput, error)
	ListTags(ctx context.Context, in *lambda.ListTagsInput, optFns ...func(*lambda.Options)) (*lambda.ListTagsOutput, error)
	DeleteFunction(ctx context.Context, in *lambda.DeleteFunctionInput, optFns ...func(*lambda.Options)) (*lambda.DeleteFunctionOutput, error)
}

// DeleteRuntimes deletes every runtime function of namePrefix (named
// FunctionName(namePrefix, …) and tagged TagKey = namePrefix), each with
// its versions and aliases, and returns their names. It pages through all
// the functions of the account and region; a function gone meanwhile is no
// error, so running it again (a retried stack delete) is harmless. An
// empty namePrefix is refused: it would match every stage's runtimes.
func DeleteRuntimes(ctx context.Context, client TeardownAPI, namePrefix string) ([]string, error) {
	if namePrefix == "" {
		return nil, errors.New("lambdaruntime: delete runtimes: no name prefix")
	}
	begin := FunctionName(namePrefix, "")
	var deleted []string
	pages := lambda.NewListFunctionsPaginator(client, &lambda.ListFunctionsInput{})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return deleted, fmt.Errorf("list functions: %w", err)
		}
		for _, fn := range page.Functions {
			name := aws.ToString(fn.FunctionName)
			if !strings.HasPrefix(name, begin) {
				continue
			}
			gone, err := deleteTagged(ctx, client, unqualified(aws.ToString(fn.FunctionArn)), name, namePrefix)
			if err != nil {
				return deleted, err
			}
			if gone {
				deleted = append(deleted, name)
			}
		}
	}
	return deleted, nil
}

// deleteTagged deletes the function when its tag says namePrefix made it.
func deleteTagged(ctx context.Context, client TeardownAPI, arn, name, namePrefix string) (bool, error) {
	var missing *types.ResourceNotFoundException
	tags, err := client.ListTags(ctx, &lambda.ListTagsInput{Resource: aws.String(arn)})
	switch {
	case errors.As(err, &missing):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("read the tags of function %s: %w", name, err)
	case tags.Tags[TagKey] != namePrefix:
		return false, nil // another stage's, or not made by a stage
	}
	_, err = client.DeleteFunction(ctx, &lambda.DeleteFunctionInput{FunctionName: aws.String(name)})
	if err != nil && !errors.As(err, &missing) {
		return false, fmt.Errorf("delete function %s: %w", name, err)
	}
	return true, nil
}
