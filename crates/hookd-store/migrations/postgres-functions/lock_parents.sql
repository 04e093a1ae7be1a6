-- hookd function lock_parents, definition 1.
-- Takes a key share lock on each application, message and endpoint named (NULL: none of that
-- kind), table by table and in id order, as every writer takes them, and fails as the foreign
-- key it stands for (migration 0030) did when one does not exist: SQLSTATE 23503, the
-- constraint named for that key. Held to the end of the transaction, the lock keeps the parent
-- from being deleted before the rows written under it are committed, so the delete's trigger
-- below sees them.
CREATE OR REPLACE FUNCTION lock_parents(app_ids TEXT[], message_ids TEXT[], endpoint_ids TEXT[])
RETURNS void LANGUAGE plpgsql
-- Each parent by its key, whatever the statistics say (a scan of `messages` per batch, chosen
-- for a table the planner believes small, would cost more than the keys it replaces).
SET enable_seqscan = off AS $$
BEGIN
    IF (SELECT count(DISTINCT a) FROM unnest(app_ids) a) > (
        SELECT count(*) FROM (
            SELECT FROM applications WHERE id = ANY(app_ids) ORDER BY id FOR KEY SHARE
        ) locked
    ) THEN
        RAISE EXCEPTION 'an application written to does not exist'
            USING ERRCODE = 'foreign_key_violation', CONSTRAINT = 'messages_app_id_fkey';
    END IF;
    IF (SELECT count(DISTINCT m) FROM unnest(message_ids) m) > (
        SELECT count(*) FROM (
            SELECT FROM messages WHERE id = ANY(message_ids) ORDER BY id FOR KEY SHARE
        ) locked
    ) THEN
        RAISE EXCEPTION 'a message written to does not exist'
            USING ERRCODE = 'foreign_key_violation', CONSTRAINT = 'deliveries_message_id_fkey';
    END IF;
    IF (SELECT count(DISTINCT e) FROM unnest(endpoint_ids) e) > (
        SELECT count(*) FROM (
            SELECT FROM endpoints WHERE id = ANY(endpoint_ids) ORDER BY id FOR KEY SHARE
        ) locked
    ) THEN
        RAISE EXCEPTION 'an endpoint written to does not exist'
            USING ERRCODE = 'foreign_key_violation', CONSTRAINT = 'deliveries_endpoint_id_fkey';
    END IF;
END
$$;

-- What the keys' cascades did: deleting applications deletes their messages, and deleting
-- messages or endpoints their deliveries (whose own trigger takes their attempts), once per
-- statement, by the children's indexes.
CREATE OR REPLACE FUNCTION children_follow_parents() RETURNS trigger
LANGUAGE plpgsql
SET enable_hashjoin = off SET enable_mergejoin = off SET enable_seqscan = off AS $$
BEGIN
    IF TG_TABLE_NAME = 'applications' THEN
        DELETE FROM messages m USING gone g WHERE m.app_id = g.id;
    ELSIF TG_TABLE_NAME = 'messages' THEN
        DELETE FROM deliveries d USING gone g WHERE d.message_id = g.id;
    ELSE
        DELETE FROM deliveries d USING gone g WHERE d.endpoint_id = g.id;
    END IF;
    RETURN NULL;
END
$$;
CREATE OR REPLACE TRIGGER applications_take_their_messages AFTER DELETE ON applications
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT
    EXECUTE FUNCTION children_follow_parents();
CREATE OR REPLACE TRIGGER messages_take_their_deliveries AFTER DELETE ON messages
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT
    EXECUTE FUNCTION children_follow_parents();
CREATE OR REPLACE TRIGGER endpoints_take_their_deliveries AFTER DELETE ON endpoints
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT
    EXECUTE FUNCTION children_follow_parents();
