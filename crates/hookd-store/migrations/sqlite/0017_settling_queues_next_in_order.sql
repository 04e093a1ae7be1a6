-- hookd schema v17 (SQLite): the writer, not a trigger, queues a key's next delivery when its
-- head settles.
--
-- SQLite runs a row trigger's WHEN clause inside the trigger's own program, so every update of
-- `next_attempt_at` (each claim and each record, ordered or not) started that program and
-- allocated its frame, though almost none had an ordering key. The statements that settle a
-- delivery (the record's and the skip's, both on the writer) now queue the oldest waiting
-- delivery of its key themselves, in the same transaction. Deletes keep their trigger: a
-- cascade deletes deliveries without any statement of hookd's naming them.
DROP TRIGGER deliveries_next_in_order;
