-- hookd schema v23 (PostgreSQL): `deliveries_by_endpoint_status` holds only deliveries not yet
-- delivered, as SQLite's does since its v18.
--
-- The index serves searches for an endpoint's pending, sending and failed deliveries (a search
-- for delivered ones walks `deliveries_by_endpoint` or the messages), yet it held every
-- delivery, so each success, which moves its row to a new version, wrote an entry no search
-- reads. The status searches say `d.status <> 0`, which lets the planner use the partial index
-- whatever status a prepared statement's parameter holds. A process of the previous version
-- still searches correctly, through `deliveries_by_endpoint`.
DROP INDEX deliveries_by_endpoint_status;
CREATE INDEX deliveries_by_endpoint_status ON deliveries (endpoint_id, status, message_id)
    WHERE status <> 0;
