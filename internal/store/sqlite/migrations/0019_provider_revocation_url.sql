-- 0019: a provider's OAuth 2.0 token revocation endpoint (RFC 7009), called
-- when agent auth deletes a token; '' means the provider has none.
ALTER TABLE providers ADD COLUMN revocation_url TEXT NOT NULL DEFAULT '';
