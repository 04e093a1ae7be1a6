-- hookd function attempts_follow_deliveries, definition 1.
-- Deletes the attempts of the deliveries a statement deleted (deleting an application, an
-- endpoint or a message deletes their deliveries), once per statement, by the attempts'
-- message index. Attempts reference no table (migration 0029): they are written only beside
-- their delivery, so this keeps what the foreign keys kept, no attempt outliving its delivery.
CREATE OR REPLACE FUNCTION attempts_follow_deliveries() RETURNS trigger
LANGUAGE plpgsql
-- Planned once per connection, for any number of deliveries: by key, never a scan of attempts.
SET enable_hashjoin = off SET enable_mergejoin = off SET enable_seqscan = off AS $$
BEGIN
    DELETE FROM attempts a USING gone g
    WHERE a.message_id = g.message_id AND a.endpoint_id = g.endpoint_id;
    RETURN NULL;
END
$$;
CREATE OR REPLACE TRIGGER deliveries_take_their_attempts AFTER DELETE ON deliveries
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT
    EXECUTE FUNCTION attempts_follow_deliveries();
