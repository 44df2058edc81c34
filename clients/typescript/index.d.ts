/**
 * A typed client of idemflow's HTTP API (./index.js): openapi-fetch's `createClient` over the types
 * generated from the OpenAPI document (./schema.d.ts, `npm run client`). Problems come back as
 * `error` (application/problem+json with a stable `code`, docs/problems.md).
 */
import type { Client } from "openapi-fetch";
import type { paths } from "./schema.js";

export type { components, operations, paths } from "./schema.js";

export interface IdemflowClientOptions {
  /** Where the engine answers, e.g. `http://localhost:8787` under `npm start`. */
  baseUrl: string;
  /** A workspace's API token (`API_TOKENS`), or an operator's (`OPERATOR_TOKENS`) for /v1/operator. */
  token: string;
  /** A fetch to send the requests with (a test stub, a service binding's `fetch`); the global one by default. */
  fetch?: (request: Request) => Promise<Response>;
}

/** openapi-fetch's client over idemflow's paths: `GET`, `PUT`, `POST`, `DELETE`… each answers `{ data, error, response }`. */
export type IdemflowClient = Client<paths>;

/** A client that sends `Authorization: Bearer <token>` to `baseUrl` with every request. */
export declare function idemflowClient(options: IdemflowClientOptions): IdemflowClient;

/**
 * A new Idempotency-Key for an action (retry, cancel, start over, erase, an event): make one per
 * intended action and send the same one again when you retry that action — the engine then acts once.
 */
export declare function newIdempotencyKey(): string;
