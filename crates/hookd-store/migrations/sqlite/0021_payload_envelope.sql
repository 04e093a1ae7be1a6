-- hookd schema v21 (SQLite): the Standard Webhooks envelope, asked for by an application or
-- an event type. Where either asks, a published payload is stored (and delivered) as
-- `{"type": …, "timestamp": …, "data": <the payload>}`; off by default, as Svix sends the
-- producer's bytes as they are.
ALTER TABLE applications ADD COLUMN envelope INTEGER NOT NULL DEFAULT 0;
ALTER TABLE event_types ADD COLUMN envelope INTEGER NOT NULL DEFAULT 0;
