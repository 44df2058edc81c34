/**
 * A typed client of idemflow's HTTP API: the types openapi-typescript generates from the OpenAPI
 * document (./schema.d.ts, `npm run client`) over openapi-fetch's `createClient` — every path,
 * parameter, body and answer typed, nothing hand-written to drift. Problems come back as `error`
 * (application/problem+json with a stable `code`, docs/problems.md).
 *
 *   const idemflow = idemflowClient({ baseUrl: "http://localhost:8787", token: "dev-token" });
 *   const { data, error } = await idemflow.POST("/v1/events", { body: { name: "payment.confirmed", match: "A-1001" } });
 */
import createClient, { type Client } from "openapi-fetch";
import type { paths } from "./schema";

export type { components, operations, paths } from "./schema";

export interface IdemflowClientOptions {
  /** Where the engine answers, e.g. `http://localhost:8787` under `npm start`. */
  baseUrl: string;
  /** A workspace's API token (`API_TOKENS`), or an operator's (`OPERATOR_TOKENS`) for /v1/operator. */
  token: string;
  fetch?: (request: Request) => Promise<Response>;
}

export type IdemflowClient = Client<paths>;

export function idemflowClient(options: IdemflowClientOptions): IdemflowClient {
  return createClient<paths>({
    baseUrl: options.baseUrl,
    headers: { authorization: `Bearer ${options.token}` },
    ...(options.fetch ? { fetch: options.fetch } : {}),
  });
}

/**
 * A new Idempotency-Key for an action (retry, cancel, start over, erase, an event): make one per
 * intended action and send the same one again when you retry that action — the engine then acts once.
 */
export function newIdempotencyKey(): string {
  return crypto.randomUUID();
}
