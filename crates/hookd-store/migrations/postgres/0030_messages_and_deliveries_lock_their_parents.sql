-- hookd schema v29 (PostgreSQL): messages and deliveries keep to their parents through the
-- locks their writers take, not through foreign keys.
--
-- A foreign key checks each row it covers on its own: a query and a key share lock on the
-- parent, per message (its application) and per delivery (its message and its endpoint), so a
-- batch of 100 messages to one endpoint locked the same application and endpoint rows 100 times
-- each. Every writer of these rows now calls `lock_parents`
-- (postgres-functions/lock_parents.sql) first, once per statement: the same key share locks,
-- taken once per parent, and the same error (23503, named for the key it replaces) when a parent
-- is missing. The triggers in that file delete an application's messages, and a message's or an
-- endpoint's deliveries, with them, as the keys' cascades did.
ALTER TABLE messages DROP CONSTRAINT messages_app_id_fkey;
ALTER TABLE deliveries DROP CONSTRAINT deliveries_message_id_fkey,
                       DROP CONSTRAINT deliveries_endpoint_id_fkey;
