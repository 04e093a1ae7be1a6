// Signs requests with the providers' own libraries, for hookd's ingest verifiers to check.
//
//     node sign.mjs < CASES
//
// CASES (standard input) is a JSON array of {scheme, secret, body, timestamp, id}; the answer on
// stdout is a JSON array of the signature headers ({name: value}) of each case, in order.
// Stripe, GitHub and Standard Webhooks are signed by their libraries (stripe's
// generateTestHeaderString, @octokit/webhooks-methods' sign, standardwebhooks' Webhook.sign);
// Shopify and Slack publish no signing helper, so theirs follow the documented algorithm with
// node:crypto.
import { createHmac } from "node:crypto";
import { readFileSync } from "node:fs";

import { sign as signGithub } from "@octokit/webhooks-methods";
import { Webhook } from "standardwebhooks";
import Stripe from "stripe";

const stripe = new Stripe("sk_test_unused");

const signers = {
  stripe: ({ secret, body, timestamp }) => ({
    "Stripe-Signature": stripe.webhooks.generateTestHeaderString({
      payload: body,
      secret,
      timestamp,
    }),
  }),
  github: async ({ secret, body }) => ({
    "X-Hub-Signature-256": await signGithub(secret, body),
  }),
  standardwebhooks: ({ secret, body, timestamp, id }) => ({
    "webhook-id": id,
    "webhook-timestamp": String(timestamp),
    "webhook-signature": new Webhook(secret).sign(id, new Date(timestamp * 1000), body),
  }),
  shopify: ({ secret, body }) => ({
    "X-Shopify-Hmac-Sha256": createHmac("sha256", secret).update(body, "utf8").digest("base64"),
  }),
  slack: ({ secret, body, timestamp }) => ({
    "X-Slack-Request-Timestamp": String(timestamp),
    "X-Slack-Signature":
      "v0=" + createHmac("sha256", secret).update(`v0:${timestamp}:${body}`, "utf8").digest("hex"),
  }),
};

const cases = JSON.parse(readFileSync(0, "utf8"));
const signed = [];
for (const one of cases) {
  signed.push(await signers[one.scheme](one));
}
process.stdout.write(JSON.stringify(signed));
