// Package s3 is the payload store in an S3 bucket: one object per key
// (PutObject, GetObject, DeleteObjects, ListObjectsV2 for prefixes). The
// bucket and its rules (encryption, no public access, lifecycle expiry of
// the prefixes that hold expiring payloads) are declared by the CDK app
// (infra/stack); see docs/aws.md, "Sizes". The contract suite
// (internal/payloads/payloadstest) runs it on MiniStack over HTTP.
package s3

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"bytes"
	"github.com/stepgraph/stepgraph/internal/payloads"
)

// Store is a payloads.Store on one bucket.
type Store struct {
	client *s3.Client
	bucket string
}

var _ payloads.Store = (*Store)(nil)

// New returns the store of bucket through cfg. UsePathStyle addresses the
// bucket in the path, which emulators need (MiniStack); AWS accepts both.
func New(cfg aws.Config, bucket string, usePathStyle bool) *Store {
	return NewFromClient(s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = usePathStyle }), bucket)
}

// NewFromClient is New with a client built by the caller.
func NewFromClient(client *s3.Client, bucket string) *Store {
	return &Store{client: client, bucket: bucket}
}

// Put implements payloads.Store.
func (s *Store) Put(ctx context.Context, key string, data []byte) error {
	if err := payloads.CheckPut(key, data); err != nil {
		return err
	}
	_, err := s.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(s.bucket), Key: aws.String(key), Body: bytes.NewReader(data),
		ContentLength: aws.Int64(int64(len(data))),
	})
	if err != nil {
		return fmt.Errorf("payloads/s3: put: %w", err)
	}
	return nil
}

// Get implements payloads.Store. It reads at most MaxBytes.
func (s *Store) Get(ctx context.Context, key string) ([]byte, error) {
	if err := payloads.CheckKey(key); err != nil {
		return nil, err
	}
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key)})
	if err != nil {
		if notFound(err) {
			return nil, payloads.ErrNotFound
		}
		return nil, fmt.Errorf("payloads/s3: get: %w", err)
	}
	defer out.Body.Close()
	if out.ContentLength != nil && *out.ContentLength > payloads.MaxBytes {
		return nil, payloads.ErrTooLarge
	}
	data, err := io.ReadAll(io.LimitReader(out.Body, payloads.MaxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("payloads/s3: get: %w", err)
	}
	if len(data) > payloads.MaxBytes {
		return nil, payloads.ErrTooLarge
	}
	return data, nil
}

func notFound(err error) bool {
	var nsk *types.NoSuchKey
	if errors.As(err, &nsk) {
		return true
	}
	var ae smithy.APIError
	return errors.As(err, &ae) && (ae.ErrorCode() == "NoSuchKey" || ae.ErrorCode() == "NotFound")
}

// Delete implements payloads.Store: DeleteObjects, 1,000 keys a call.
func (s *Store) Delete(ctx context.Context, keys ...string) error {
	for _, k := range keys {
		if err := payloads.CheckKey(k); err != nil {
			return err
		}
	}
	for len(keys) > 0 {
		chunk := keys[:min(1000, len(keys))]
		keys = keys[len(chunk):]
		objs := make([]types.ObjectIdentifier, len(chunk))
		for i, k := range chunk {
			objs[i] = types.ObjectIdentifier{Key: aws.String(k)}
		}
		out, err := s.client.DeleteObjects(ctx, &s3.DeleteObjectsInput{
			Bucket: aws.String(s.bucket), Delete: &types.Delete{Objects: objs, Quiet: aws.Bool(true)},
		})
		if err != nil {
			return fmt.Errorf("payloads/s3: delete: %w", err)
		}
		for _, e := range out.Errors {
			if aws.ToString(e.Code) != "NoSuchKey" {
				return fmt.Errorf("payloads/s3: delete %s: %s", aws.ToString(e.Key), aws.ToString(e.Code))
			}
		}
	}
	return nil
}

// DeletePrefix implements payloads.Store: a listing of the prefix, page by
// page (1,000 keys), each page deleted in one call.
func (s *Store) DeletePrefix(ctx context.Context, prefix string) error {
	if err := payloads.CheckPrefix(prefix); err != nil {
		return err
	}
	return s.deleteListed(ctx, prefix)
}

// Empty deletes every object of the bucket (the stack's teardown, before
// CloudFormation deletes the bucket, which it cannot while objects are
// left; the bucket has no versioning, so no older versions remain).
func (s *Store) Empty(ctx context.Context) error {
	return s.deleteListed(ctx, "")
}

// deleteListed deletes the objects listed under prefix, page by page.
func (s *Store) deleteListed(ctx context.Context, prefix string) error {
	p := s3.NewListObjectsV2Paginator(s.client, &s3.ListObjectsV2Input{Bucket: aws.String(s.bucket), Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("payloads/s3: list: %w", err)
		}
		keys := make([]string, 0, len(page.Contents))
		for _, o := range page.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
		if err := s.Delete(ctx, keys...); err != nil {
			return err
		}
	}
	return nil
}

// CreateBucket creates the bucket with the rules the CDK app declares for
// it (tests use it on the emulator; the stack creates the deployed one).
func (s *Store) CreateBucket(ctx context.Context) error {
	_, err := s.client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(s.bucket)})
	if err != nil {
		var owned *types.BucketAlreadyOwnedByYou
		if !errors.As(err, &owned) {
			return fmt.Errorf("payloads/s3: create bucket: %w", err)
		}
	}
	return nil
}

// BucketName makes an S3 bucket name (3–63 lowercase letters, digits and
// hyphens) from a resource-name prefix such as a test's or a stage's.
func BucketName(prefix string) string {
	var b strings.Builder
	b.WriteString("sg-")
	for _, r := range strings.ToLower(prefix) {
		if b.Len() >= 50 {
			break
		}
		if 'a' <= r && r <= 'z' || '0' <= r && r <= '9' {
			b.WriteRune(r)
		} else if !strings.HasSuffix(b.String(), "-") {
			b.WriteByte('-')
		}
	}
	return strings.TrimSuffix(b.String(), "-") + "-payloads"
}
