-- hookd schema v2 (SQLite): keys and access.
--
-- endpoints.secret now holds the endpoint's signing keys (HMAC secrets, ed25519 private keys
-- and rotated-out keys still in their overlap window) sealed under a master key:
-- 'hk1:<key id>:<base64url(nonce, ciphertext)>', never a key in the clear. Rows written by
-- schema v1 (a plain whsec_ secret) are sealed by hookd at its next start.
--
-- API tokens get a name, revocation (rows are kept, so a revoked token stays on record), an
-- optional per-token rate limit (requests per second) and read-only access.
ALTER TABLE api_tokens ADD COLUMN name TEXT NOT NULL DEFAULT '';
ALTER TABLE api_tokens ADD COLUMN revoked_at INTEGER;
ALTER TABLE api_tokens ADD COLUMN rate_limit INTEGER;
ALTER TABLE api_tokens ADD COLUMN read_only INTEGER NOT NULL DEFAULT 0;
