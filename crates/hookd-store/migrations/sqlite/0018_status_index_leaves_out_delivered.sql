-- hookd schema v18 (SQLite): `deliveries_by_endpoint_status` holds only deliveries not yet
-- delivered.
--
-- The index serves searches for an endpoint's pending, sending and failed deliveries (a
-- search for delivered ones walks the messages and probes each by key), yet it held every
-- delivery, so every success wrote an entry no search reads. Partial, it stays as small as
-- the deliveries that are not settled well, and a success only removes an entry. SQLite uses
-- a partial index only for a query that repeats its condition: the status searches say
-- `d.status <> 0`.
DROP INDEX deliveries_by_endpoint_status;
CREATE INDEX deliveries_by_endpoint_status ON deliveries (endpoint_id, status, message_id)
    WHERE status <> 0;
