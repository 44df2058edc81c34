// @ts-check
/**
 * A typed client of idemflow's HTTP API: openapi-fetch's `createClient` over the types
 * openapi-typescript generates from the OpenAPI document (./schema.d.ts, `npm run client`) — every
 * path, parameter, body and answer typed, nothing hand-written to drift. Problems come back as
 * `error` (application/problem+json with a stable `code`, docs/problems.md).
 *
 * Plain ESM JavaScript with its declarations in ./index.d.ts: nothing to build, it runs as shipped
 * under Node (20+) and bundlers. `npm run client:check` type-checks this file against them.
 *
 *   const idemflow = idemflowClient({ baseUrl: "http://localhost:8787", token: "dev-token" });
 *   const { data, error } = await idemflow.GET("/v1/workflows");
 */
import createClient from "openapi-fetch";

/**
 * @param {import("./index.js").IdemflowClientOptions} options
 * @returns {import("./index.js").IdemflowClient}
 */
export function idemflowClient(options) {
  /** @type {import("./index.js").IdemflowClient} */
  const client = createClient({
    baseUrl: options.baseUrl,
    headers: { authorization: `Bearer ${options.token}` },
    ...(options.fetch ? { fetch: options.fetch } : {}),
  });
  return client;
}

/**
 * A new Idempotency-Key for an action (retry, cancel, start over, erase, an event): make one per
 * intended action and send the same one again when you retry that action — the engine then acts once.
 *
 * @returns {string}
 */
export function newIdempotencyKey() {
  return globalThis.crypto.randomUUID();
}
