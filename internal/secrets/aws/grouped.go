package aws

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"strconv"
	"strings"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	smtypes "github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"
	"github.com/aws/smithy-go"

	"github.com/stepgraph/stepgraph/internal/secrets"
)

// Grouped values (Options.Grouped): Secrets Manager bills every secret
// ($0.40 a month), so one secret per value makes the bill grow with the
// values (a provider's client secret, each deployment secret, each agent
// token). Grouped, the values of one owner share a secret, a JSON map from
// key to base64 value: the owner is the hint's first two segments
// (providers/<org>, deployments/<deployment>, orgs/<org>,
// agentauth/<org>), so the count grows with organizations and deployments,
// and a kind's IAM grant (<prefix><kind>/*) still covers exactly its kind.
// A map that would pass groupLimit goes to the owner's next shard
// (<owner>/values.<n>); a value too large for any map gets a secret of its
// own, as ungrouped.
//
// A reference is <hint>-<24 hex key>@<shard>: '@' is no hint character, so
// references of values stored one per secret (no '@') stay readable.
//
// Writes are compare-and-set on the version Secrets Manager calls
// AWSCURRENT: read the map and its VersionId, PutSecretValue a new version
// with a label of our own (ClientRequestToken makes a retried put the same
// version), then UpdateSecretVersionStage moves AWSCURRENT to it with
// RemoveFromVersionId = the version read, which Secrets Manager refuses
// when AWSCURRENT has moved meanwhile: two writers never lose each other's
// value; the loser reads again and retries.

const (
	// groupLimit bounds a map's JSON (Secrets Manager takes 65,536 bytes),
	// with room for one more entry's overhead.
	groupLimit = 60_000
	// maxShards bounds the secrets of one owner (then one per value).
	maxShards = 64
	// casAttempts bounds the compare-and-set retries of one write.
	casAttempts = 20
	// Labels of the versions a write makes: what made them, for the
	// version history and for IAM audits.
	labelAdd    = "stepgraph-add"
	labelRemove = "stepgraph-remove"
)

// groupOf returns the owner of hint: its first two segments (the whole
// hint when it has fewer).
func groupOf(hint string) string {
	parts := strings.SplitN(hint, "/", 3)
	if len(parts) > 2 {
		parts = parts[:2]
	}
	return strings.Join(parts, "/")
}

func shardName(group string, shard int) string { return group + "/values." + strconv.Itoa(shard) }

// groupedRef splits a grouped reference into the name of its secret
// (without the prefix) and its key; ok false for any other string.
func groupedRef(ref string) (name, key string, ok bool) {
	at := strings.LastIndexByte(ref, '@')
	if at < 0 {
		return "", "", false
	}
	shard, err := strconv.Atoi(ref[at+1:])
	if err != nil || shard < 0 || shard >= maxShards || strconv.Itoa(shard) != ref[at+1:] || !validRef(ref[:at]) {
		return "", "", false
	}
	dash := strings.LastIndexByte(ref[:at], '-')
	return shardName(groupOf(ref[:dash]), shard), ref[dash+1 : at], true
}

// groupVersion is a map as read, with the version it was read at ("" when
// the secret does not exist).
type groupVersion struct {
	values    map[string]string
	versionID string
}

// readGroup reads the current map of name. A write's read names the stage
// AWSCURRENT, the version its compare-and-set is on (a Get leaves it to the
// default, the same version: the grants test tells the two apart by it).
func (s *Store) readGroup(ctx context.Context, name string, forWrite bool) (groupVersion, error) {
	in := &secretsmanager.GetSecretValueInput{SecretId: awssdk.String(s.opts.Prefix + name)}
	if forWrite {
		in.VersionStage = awssdk.String("AWSCURRENT")
	}
	out, err := s.client.GetSecretValue(ctx, in)
	if isNotFound(err) {
		return groupVersion{values: map[string]string{}}, nil
	}
	if err != nil {
		return groupVersion{}, codeOnly("read", name, err)
	}
	g := groupVersion{values: map[string]string{}, versionID: awssdk.ToString(out.VersionId)}
	if err := json.Unmarshal([]byte(awssdk.ToString(out.SecretString)), &g.values); err != nil {
		// Never the content in the error: it is other values.
		return groupVersion{}, fmt.Errorf("secrets/aws: %q is no map of values", name)
	}
	return g, nil
}

// errCASLost: the map changed between the read and the write.
var errCASLost = errors.New("secret changed meanwhile")

// writeGroup stores values as the new current version of name, on
// condition that the current version is still from (a new secret when from
// is ""). label says what the write does.
func (s *Store) writeGroup(ctx context.Context, name string, from groupVersion, values map[string]string, label string) error {
	body, err := json.Marshal(values)
	if err != nil {
		return err
	}
	token := newToken()
	if from.versionID == "" {
		in := &secretsmanager.CreateSecretInput{
			Name: awssdk.String(s.opts.Prefix + name), Description: awssdk.String(s.opts.Description),
			SecretString: awssdk.String(string(body)), ClientRequestToken: awssdk.String(token),
			Tags: s.tags(name),
		}
		if s.opts.KMSKeyID != "" {
			in.KmsKeyId = awssdk.String(s.opts.KMSKeyID)
		}
		_, err := s.client.CreateSecret(ctx, in)
		var exists *smtypes.ResourceExistsException
		switch {
		case errors.As(err, &exists):
			if cur, rerr := s.readGroup(ctx, name, true); rerr == nil && cur.versionID == token {
				return nil // our own create, whose answer was lost
			}
			return errCASLost // another writer created it first
		case err != nil:
			return codeOnly("create", name, err)
		}
		return nil
	}
	if _, err := s.client.PutSecretValue(ctx, &secretsmanager.PutSecretValueInput{
		SecretId: awssdk.String(s.opts.Prefix + name), ClientRequestToken: awssdk.String(token),
		SecretString: awssdk.String(string(body)), VersionStages: []string{label},
	}); err != nil {
		return codeOnly("put", name, err)
	}
	_, err = s.client.UpdateSecretVersionStage(ctx, &secretsmanager.UpdateSecretVersionStageInput{
		SecretId: awssdk.String(s.opts.Prefix + name), VersionStage: awssdk.String("AWSCURRENT"),
		MoveToVersionId: awssdk.String(token), RemoveFromVersionId: awssdk.String(from.versionID),
	})
	if err == nil {
		return nil
	}
	cur, rerr := s.readGroup(ctx, name, true)
	switch {
	case rerr != nil:
		return rerr
	case cur.versionID == token:
		return nil // moved by our first attempt, whose answer was lost
	case cur.versionID != from.versionID:
		return errCASLost
	}
	return codeOnly("update stage", name, err)
}

// newToken is a ClientRequestToken: 32 hex characters (the API takes 32 to 64).
func newToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// createGrouped stores value in hint's owner's map and returns its
// reference; ok false when it fits no shard.
func (s *Store) createGrouped(ctx context.Context, hint string, value []byte) (string, bool, error) {
	suffix := make([]byte, suffixHexLen/2)
	if _, err := rand.Read(suffix); err != nil {
		return "", false, fmt.Errorf("secrets/aws: create %q: random suffix: %v", hint, err)
	}
	key := hex.EncodeToString(suffix)
	enc := base64.StdEncoding.EncodeToString(value)
	if len(enc)+len(key)+8 > groupLimit {
		return "", false, nil
	}
	group := groupOf(hint)
	for shard := 0; shard < maxShards; shard++ {
		name := shardName(group, shard)
		full, err := s.update(ctx, name, labelAdd, func(m map[string]string) bool {
			m[key] = enc
			body, _ := json.Marshal(m)
			return len(body) <= groupLimit
		})
		if err != nil {
			return "", false, fmt.Errorf("secrets/aws: create %q: %w", hint, err)
		}
		if !full {
			ref := hint + "-" + key + "@" + strconv.Itoa(shard)
			s.put(ref, value)
			return ref, true, nil
		}
	}
	return "", false, nil
}

// update applies change to the current map of name and writes it with
// compare-and-set, reading again after a lost race. change reports whether
// the map is to be written; false leaves it (full reports that for a
// create).
func (s *Store) update(ctx context.Context, name, label string, change func(map[string]string) bool) (full bool, err error) {
	for attempt := 0; attempt < casAttempts; attempt++ {
		cur, err := s.readGroup(ctx, name, true)
		if err != nil {
			return false, err
		}
		next := make(map[string]string, len(cur.values)+1)
		for k, v := range cur.values {
			next[k] = v
		}
		if !change(next) {
			return true, nil
		}
		err = s.writeGroup(ctx, name, cur, next, label)
		if !errors.Is(err, errCASLost) {
			return false, err
		}
		// Lost to another writer of the map: back off a random while,
		// growing, so that writers racing on one owner spread out.
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(time.Duration(mrand.Int64N(int64(attempt+1) * int64(20*time.Millisecond)))):
		}
	}
	return false, fmt.Errorf("%q: %w %d times", name, errCASLost, casAttempts)
}

func (s *Store) getGrouped(ctx context.Context, ref, name, key string) ([]byte, error) {
	g, err := s.readGroup(ctx, name, false)
	if err != nil {
		return nil, err
	}
	enc, ok := g.values[key]
	if !ok {
		return nil, fmt.Errorf("secrets/aws: get %q: %w", ref, secrets.ErrNotFound)
	}
	v, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		return nil, fmt.Errorf("secrets/aws: get %q: stored value is not base64", ref)
	}
	return v, nil
}

func (s *Store) deleteGrouped(ctx context.Context, ref, name, key string) error {
	_, err := s.update(ctx, name, labelRemove, func(m map[string]string) bool {
		if _, ok := m[key]; !ok {
			return false // gone already: nothing to write
		}
		delete(m, key)
		return true
	})
	if err != nil {
		return fmt.Errorf("secrets/aws: delete %q: %w", ref, err)
	}
	return nil
}

// codeOnly is an error of the service naming op, the secret and the error
// code only: the message of a write could quote the map, which holds other
// values.
func codeOnly(op, name string, err error) error {
	code := "error"
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		code = apiErr.ErrorCode()
	}
	var cause error
	switch {
	case errors.Is(err, context.Canceled):
		cause = context.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		cause = context.DeadlineExceeded
	}
	return &opError{msg: fmt.Sprintf("secrets/aws: %s %q: %s", op, name, code), cause: cause}
}
