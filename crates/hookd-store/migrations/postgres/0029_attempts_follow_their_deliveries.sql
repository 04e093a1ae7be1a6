-- hookd schema v28 (PostgreSQL): an attempt goes with its delivery, not through foreign keys.
--
-- Every attempt is written by `record_batch`, and only while its delivery, which references the
-- same message and endpoint, is locked and present: the two foreign keys checked again what the
-- delivery already holds, with a query and a row lock per attempt on the message and on the
-- endpoint (locks every publish and every other record take too). What they still did, delete
-- an attempt with its message or endpoint, the trigger `deliveries_take_their_attempts`
-- (postgres-functions/attempts_follow_deliveries.sql) does when their delivery is deleted,
-- as it is whenever its message or endpoint is.
ALTER TABLE attempts DROP CONSTRAINT attempts_message_id_fkey,
                     DROP CONSTRAINT attempts_endpoint_id_fkey;
