-- hookd function outbox_notify, definition 1.
-- Wakes the relays of every hookd process at commit (NOTIFY is transactional: a rolled-back
-- insert notifies nobody), so a producer needs no NOTIFY of its own.
CREATE OR REPLACE FUNCTION outbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('hookd_outbox', '');
    RETURN NULL;
END
$$;
