-- hookd schema v16 (SQLite): a spent `eventId` is refused by the publish, not by a trigger.
--
-- A trigger on `messages` makes every insert into it a multi-statement write, which SQLite
-- guards with a statement journal: every page the insert touches is copied first, on every
-- publish, although the trigger refuses almost nothing. The publish (the one writer of
-- messages) now looks `spent_event_ids` up itself when a message has an `eventId`, in the same
-- transaction, before its insert.
DROP TRIGGER messages_event_id_spent;
