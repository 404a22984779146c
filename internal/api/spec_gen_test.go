package api

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"testing"
)

// The JSON made at build time is the YAML's (cmd/specjson, `go generate
// ./internal/api`): the hash that makes the server use it, and the bytes
// it serves at /openapi.json, which must be those of the YAML parsed.
func TestGeneratedSpecMatchesYAML(t *testing.T) {
	sum := sha256.Sum256(openapiYAML)
	if hex.EncodeToString(sum[:]) != openapiYAMLSHA256 {
		t.Fatal("openapi.gen.json is stale: openapi.yaml changed since it was made; run `go generate ./internal/api`")
	}
	_, raw, err := yamlDocument()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(raw, openapiJSON) {
		t.Fatal("openapi.gen.json differs from openapi.yaml as JSON; run `go generate ./internal/api`")
	}
	_, used, err := specDocument()
	if err != nil || !bytes.Equal(used, openapiJSON) {
		t.Fatalf("the server does not use the generated JSON (%v)", err)
	}
}
