// A webhook receiver for hookd in Node: verify, deduplicate, answer, then apply in order.
//
//   npm ci
//   WEBHOOK_SECRET=whsec_... DATABASE_URL=postgres://... node receiver.mjs
//
// RECEIVER_PORT (default 8000, 0 picks a free port) is optional. Events come in the Standard
// Webhooks envelope (the application's "envelope": true): {"type": "consignment.updated",
// "timestamp": "...", "data": {"consignment": "C-4471", "status": "delivered", "version": 4}};
// a test send carries "test": true and changes nothing.

import http from "node:http";
import pg from "pg";
import { Webhook } from "standardwebhooks";

const verifier = new Webhook(process.env.WEBHOOK_SECRET);
const db = new pg.Pool({ connectionString: process.env.DATABASE_URL });

await db.query(`
  CREATE TABLE IF NOT EXISTS webhook_inbox (
    webhook_id TEXT PRIMARY KEY, received_at BIGINT NOT NULL, payload BYTEA,
    claimed_until BIGINT NOT NULL DEFAULT 0, processed_at BIGINT);
  CREATE TABLE IF NOT EXISTS consignments (
    key TEXT PRIMARY KEY, version BIGINT NOT NULL, state TEXT NOT NULL);`);

function answer(response, status, body) {
  response.writeHead(status, { "content-type": "application/json" });
  response.end(body === undefined ? "" : JSON.stringify(body));
}

async function receive(request, response) {
  const chunks = [];
  for await (const chunk of request) chunks.push(chunk);
  const body = Buffer.concat(chunks);
  try {
    // The raw bytes, before any JSON parsing: the signature covers exactly these.
    verifier.verify(body, request.headers, { jsonParse: false });
  } catch (error) {
    return answer(response, 401, { error: "unverified", reason: error.message });
  }
  // One conditional insert: a retry of the same webhook-id inserts nothing.
  const { rowCount } = await db.query(
    `INSERT INTO webhook_inbox (webhook_id, received_at, payload) VALUES ($1, $2, $3)
     ON CONFLICT (webhook_id) DO NOTHING`,
    [request.headers["webhook-id"], Date.now(), body],
  );
  answer(response, 204); // new or duplicate: acknowledged, the worker does the rest
  if (rowCount === 1) wake();
}

// Applies one recorded webhook: only a newer version changes a consignment.
async function apply(webhookId, payload) {
  let envelope;
  try {
    envelope = JSON.parse(payload);
  } catch {}
  // The mark is inside the signed body: once verified, a test send really is one.
  if (envelope?.test === true) return console.log(`${webhookId}: a test send, nothing applied`);
  const event = envelope?.type === "consignment.updated" ? envelope.data : undefined;
  if (typeof event?.consignment !== "string" || !Number.isInteger(event.version)) {
    return console.log(`${webhookId}: not a consignment event, ignored`);
  }
  const { rowCount } = await db.query(
    `INSERT INTO consignments (key, version, state) VALUES ($1, $2, $3)
     ON CONFLICT (key) DO UPDATE SET version = excluded.version, state = excluded.state
     WHERE consignments.version < excluded.version`,
    [event.consignment, event.version, JSON.stringify({ status: event.status })],
  );
  console.log(`${webhookId}: version ${event.version} ${rowCount ? "applied" : "stale, skipped"}`);
}

// The worker: claims pending webhooks oldest first (FOR UPDATE SKIP LOCKED, so several
// processes can share the inbox); only a newer version changes a consignment.
let working = false;
async function wake() {
  if (working) return;
  working = true;
  try {
    for (;;) {
      const { rows } = await db.query(
        `UPDATE webhook_inbox SET claimed_until = $1 WHERE webhook_id IN (
           SELECT webhook_id FROM webhook_inbox
           WHERE processed_at IS NULL AND claimed_until <= $2
           ORDER BY received_at LIMIT 100 FOR UPDATE SKIP LOCKED)
         RETURNING webhook_id, payload, received_at`,
        [Date.now() + 300_000, Date.now()],
      );
      if (rows.length === 0) break;
      rows.sort((a, b) => Number(a.received_at) - Number(b.received_at));
      for (const { webhook_id, payload } of rows) {
        await apply(webhook_id, payload);
        await db.query(
          "UPDATE webhook_inbox SET processed_at = $2, payload = NULL WHERE webhook_id = $1",
          [webhook_id, Date.now()],
        );
      }
    }
  } catch (error) {
    console.error("worker:", error.message); // rows come back after their lease
  } finally {
    working = false;
  }
}

setInterval(wake, 1000); // leftovers from a crash, and rows whose lease ran out
setInterval(() => {
  // Forget ids processed 30 days ago: longer than hookd's retries and manual resends.
  db.query("DELETE FROM webhook_inbox WHERE processed_at < $1", [Date.now() - 30 * 86_400_000])
    .catch((error) => console.error("purge:", error.message));
}, 3_600_000);
const server = http.createServer((request, response) => {
  if (request.method !== "POST") return answer(response, 405);
  receive(request, response).catch((error) => {
    console.error("receive:", error.message);
    answer(response, 503); // not stored: the sender retries
  });
});
server.listen(Number(process.env.RECEIVER_PORT ?? 8000), "127.0.0.1", () => {
  console.log(`receiving webhooks at http://127.0.0.1:${server.address().port}/webhooks`);
});
