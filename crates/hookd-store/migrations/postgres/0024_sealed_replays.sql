-- hookd schema v24 (PostgreSQL): `Idempotency-Key` replays are kept sealed under the master
-- key, as SQLite's are since its v19.
--
-- A kept response can carry a new API token, a portal link or an endpoint secret; hookd now
-- seals every kept body, and the ones kept in clear before are dropped rather than left for
-- their 24 hours. A POST retried across the upgrade with the same key is done again. A process
-- of the previous version reads a sealed body as the answer's text: run one version at a time
-- across this upgrade.
DELETE FROM idempotent_responses;
