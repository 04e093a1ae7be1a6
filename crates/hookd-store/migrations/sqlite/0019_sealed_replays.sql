-- hookd schema v19 (SQLite): `Idempotency-Key` replays are kept sealed under the master key.
--
-- A kept response can carry a new API token, a portal link or an endpoint secret; hookd now
-- seals every kept body, and the ones kept in clear before are dropped rather than left for
-- their 24 hours. A POST retried across the upgrade with the same key is done again.
DELETE FROM idempotent_responses;
