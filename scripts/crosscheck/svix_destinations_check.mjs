// Drives a running hookd's destinations and pollers with the official Svix JavaScript SDK.
//
//     node svix_destinations_check.mjs SVIX_PACKAGE_DIR BASE_URL ADMIN_TOKEN CLOCK_OFFSET_FILE
//
// SVIX_PACKAGE_DIR is the installed npm package (`…/node_modules/svix`); CLOCK_OFFSET_FILE is
// hookd's test clock, moved forward so the messages published are settled for polling. Exits
// non-zero on the first call that fails or answers wrong.
import { renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [packageDir, baseUrl, token, clock] = process.argv.slice(2);
const { Svix } = await import(pathToFileURL(join(packageDir, "dist/index.mjs")).href);

function check(condition, what) {
  if (!condition) {
    throw new Error(`failed: ${what}`);
  }
  console.log(`ok  ${what}`);
}

async function rejects(call, what) {
  try {
    await call();
  } catch (error) {
    console.log(`ok  ${what} (${error.code ?? error.name})`);
    return;
  }
  throw new Error(`failed: ${what}: no error`);
}

function setClock(offsetMs) {
  writeFileSync(`${clock}.new`, String(offsetMs));
  renameSync(`${clock}.new`, clock);
}

const numbers = (page) => page.data.map((m) => m.payload.n);

const svix = new Svix(token, { serverUrl: baseUrl });
const app = (await svix.application.create({ name: "destinations-js" })).id;
const d = svix.destination;

const poller = await d.create(app, {
  uid: "poller",
  type: "pollingEndpoint",
  eventTypes: ["order.paid"],
});
check(poller.type === "pollingEndpoint" && typeof poller.currentIterator === "string",
  "create pollingEndpoint (config left out)");
const rabbit = await d.create(app, {
  type: "rabbitMq",
  config: { uri: "amqp://guest:hunter2@127.0.0.1:5672/%2f", routingKey: "orders" },
  batchSize: 1,
});
check(rabbit.config.routingKey === "orders", "create rabbitMq");
// Distinct enough that no id or timestamp in a listing can contain it by chance.
const SECRET_KEY = "hookd-check-secret-access-key";
const s3 = await d.create(app, {
  type: "amazonS3",
  config: { bucket: "hookd-events", accessKeyId: "AK", secretAccessKey: SECRET_KEY,
    endpointUrl: "http://127.0.0.1:5000" },
  batchSize: 100,
  maxWaitSecs: 10,
});
check(s3.batchSize === 100 && s3.maxWaitSecs === 10, "create amazonS3");
const listed = await d.list(app, { limit: 10 });
check(listed.data.map((x) => x.type).join() === "pollingEndpoint,rabbitMq,amazonS3", "list");
check(!JSON.stringify(listed).includes("hunter2") && !JSON.stringify(listed).includes(SECRET_KEY),
  "list: no credentials shown");
check((await d.get(app, "poller")).id === poller.id, "get by uid");
const upserted = await d.upsert(app, "poller", { type: "pollingEndpoint", uid: "poller",
  eventTypes: ["order.paid"] });
check(upserted.id === poller.id, "upsert replaces");
const patched = await d.patch(app, rabbit.id, { type: "rabbitMq", config: { routingKey: "k2" },
  status: "disabled" });
check(patched.status === "disabled", "patch");
await rejects(() => d.create(app, { type: "bigQuery", config: {} }), "an unserved type: 422");
await d.delete(app, s3.id);
await rejects(() => d.get(app, s3.id), "delete: then 404");

for (const [n, eventType] of [[1, "order.paid"], [2, "order.shipped"], [3, "order.paid"]]) {
  await svix.message.create(app, { eventType, payload: { n } });
}
const p = svix.message.poller;
const early = await p.poll(app, "poller");
check(early.data.length === 0 && typeof early.iterator === "string", "unsettled: nothing yet");
setClock(10_000);
const page = await p.poll(app, "poller", { limit: 1 });
check(numbers(page).join() === "1" && !page.done, "poll: oldest first");
check(page.data[0].headers["webhook-id"] === page.data[0].id, "poll: signed headers");
const rest = await p.poll(app, "poller", { iterator: page.iterator });
check(numbers(rest).join() === "3" && rest.done, "poll: order.shipped filtered out");
const since = new Date("2020-01-01T00:00:00Z");
check(numbers(await p.poll(app, "poller", { after: since, eventType: "order.paid" })).join()
  === "1,3", "poll: after and eventType");
check(numbers(await p.consumerPoll(app, "poller", "worker", { limit: 1 })).join() === "1",
  "consumerPoll: first");
check(numbers(await p.consumerPoll(app, "poller", "worker")).join() === "3",
  "consumerPoll: on from where it got to");
const sought = await p.consumerSeek(app, "poller", "worker", { after: since });
check(typeof sought.iterator === "string", "consumerSeek");
check(numbers(await p.consumerPoll(app, "poller", "worker")).join() === "1,3",
  "consumerPoll: again after the seek");
console.log("svix js destinations check passed");
