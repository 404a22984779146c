package aws

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	smtypes "github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"
)

// TagKey tags every secret a Store creates with its Prefix: what DeleteAll
// recognises as this store's (a secret an operator put under the prefix
// by hand, such as the store's embeddings key, has no such tag and stays).
const TagKey = "stepgraph:prefix"

// tags are the tags of a new secret named name (without Prefix): TagKey =
// Prefix, when there is one, and those Options.Tags gives, in key order.
func (s *Store) tags(name string) []smtypes.Tag {
	m := map[string]string{}
	if s.opts.Tags != nil {
		m = s.opts.Tags(name)
	}
	if s.opts.Prefix != "" {
		m = maps.Clone(m)
		if m == nil {
			m = map[string]string{}
		}
		m[TagKey] = s.opts.Prefix
	}
	var out []smtypes.Tag
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, smtypes.Tag{Key: awssdk.String(k), Value: awssdk.String(m[k])})
	}
	return out
}

// DeleteAll deletes, without recovery, every secret named under Prefix and
// tagged TagKey = Prefix — what Stores of this prefix created — and returns
// their names. It is the stack's teardown (docs/aws.md): it pages through
// the listing, a secret gone meanwhile is no error, and running it again
// finds nothing more. A Store without a Prefix refuses: it would match
// every stage's secrets.
func (s *Store) DeleteAll(ctx context.Context) ([]string, error) {
	if s.opts.Prefix == "" {
		return nil, errors.New("secrets/aws: delete all: the store has no prefix")
	}
	var deleted []string
	pages := secretsmanager.NewListSecretsPaginator(s.client, &secretsmanager.ListSecretsInput{
		// The name filter matches prefixes without regard to case: each
		// name is checked again below.
		Filters: []smtypes.Filter{{Key: smtypes.FilterNameStringTypeName, Values: []string{s.opts.Prefix}}},
	})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return deleted, codeOnly("list secrets under", s.opts.Prefix, err)
		}
		for _, e := range page.SecretList {
			name := awssdk.ToString(e.Name)
			if !strings.HasPrefix(name, s.opts.Prefix) || !s.tagged(e.Tags) || e.DeletedDate != nil {
				continue
			}
			_, err := s.client.DeleteSecret(ctx, &secretsmanager.DeleteSecretInput{
				SecretId: e.ARN, ForceDeleteWithoutRecovery: awssdk.Bool(true),
			})
			if err != nil && !isNotFound(err) {
				return deleted, codeOnly("delete", name, err)
			}
			deleted = append(deleted, name)
		}
	}
	s.mu.Lock()
	clear(s.cache)
	s.mu.Unlock()
	return deleted, nil
}

// tagged: the tags say this store's prefix made the secret.
func (s *Store) tagged(tags []smtypes.Tag) bool {
	for _, t := range tags {
		if awssdk.ToString(t.Key) == TagKey {
			return awssdk.ToString(t.Value) == s.opts.Prefix
		}
	}
	return false
}
