-- hookd function event_id_spent, definition 1.
-- Refuses a new message whose `eventId` a deleted record of its application still holds
-- (`spent_event_ids`), with the error a taken unique key raises, so every publish path answers
-- it as the conflict it is. A batch of publishes that meets it is written again one message at
-- a time, as for any error, and each caller gets its own answer.
CREATE OR REPLACE FUNCTION event_id_spent() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT FROM spent_event_ids s
               WHERE s.app_id = NEW.app_id AND s.event_id = NEW.event_id) THEN
        RAISE unique_violation USING MESSAGE = 'the eventId is spent',
            CONSTRAINT = 'spent_event_ids_pkey';
    END IF;
    RETURN NEW;
END
$$;
CREATE OR REPLACE TRIGGER messages_event_id_spent BEFORE INSERT ON messages
    FOR EACH ROW WHEN (NEW.event_id IS NOT NULL) EXECUTE FUNCTION event_id_spent();
