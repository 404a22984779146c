// Package payloads is the port of the payload store: large documents kept
// outside the database records that own them, by key (put, get, delete,
// delete by prefix), each at most MaxBytes. The DynamoDB store adapter uses
// it so that no item exceeds DynamoDB's 400 KB: it writes a large attribute
// here first and keeps a pointer in the item (see internal/store/dynamo,
// "Payloads").
//
// Adapters: internal/payloads/s3 (an S3 bucket; the deployed shape) and
// internal/payloads/local (files in a directory, or memory; for unit tests
// of other packages and the local shape). Both pass the contract suite in
// internal/payloads/payloadstest.
package payloads
