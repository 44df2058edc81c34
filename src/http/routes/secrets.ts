/**
 * Workspace secrets over HTTP (SPEC sections 3 and 7), scoped to the bearer token's workspace:
 *   PUT    /v1/secrets/{name}   body `{ "value": "…" }`: create or replace; answers name and times
 *   GET    /v1/secrets          names with created/updated times (and the key id that sealed each)
 *   DELETE /v1/secrets/{name}   204, or 404
 * Write-only: no route ever returns a value or a ciphertext.
 *
 * No Idempotency-Key middleware here, on purpose: PUT is idempotent by itself (the same value twice is
 * the same state), and the ledger stores a SHA-256 fingerprint of the request body — for this
 * route, a hash of the secret, which a guessable secret would not survive.
 */
import { Hono } from "hono";
import { requireWorkspace, type AppEnv } from "../auth";
import { readJsonBody } from "../../lib/request-body";
import { commonProblems } from "../../lib/common-problems";
import { isoTime } from "../../lib/iso-time";
import { MAX_SECRET_VALUE_BYTES, SecretBody } from "../openapi/requests";
import { SECRET_NAME_PATTERN } from "../../definitions/secrets";
import { keyringFrom, MasterKeyError, sealSecret } from "../../secrets/crypto";
import { RESERVED_SECRETS } from "../../secrets/resolve";
import { secretProblems } from "../../secrets/problems";
import { deleteSecret, listSecrets, putSealedSecret, type SecretListing } from "../../secrets/store";
import { log } from "../../lib/log";
import { nowOf } from "../../lib/clock";
import { checkSecretForEventSources } from "../../events/source-secret-check";

/** A credential, not a document: 4 KiB of UTF-8 covers every API key and signing secret we know. */
export { MAX_SECRET_VALUE_BYTES };
const MAX_SECRET_BODY_BYTES = 16 * 1024;

export const secretRoutes = new Hono<AppEnv>();
secretRoutes.use("*", requireWorkspace);

function checkedName(name: string): string {
  if (!SECRET_NAME_PATTERN.test(name)) throw secretProblems.nameInvalid(name);
  if (RESERVED_SECRETS.has(name)) throw secretProblems.nameReserved(name);
  return name;
}

/** Exactly `{ "value": <string> }` (the schema the OpenAPI document states); the value must fit in an HTTP header. */
function checkedValue(json: unknown): string {
  const parsed = SecretBody.safeParse(json);
  if (parsed.success) return parsed.data.value;
  const issue = parsed.error.issues[0];
  const aboutTheValue = issue?.path[0] === "value" && (issue.code === "custom" || issue.code === "too_small");
  throw aboutTheValue ? secretProblems.valueInvalid(MAX_SECRET_VALUE_BYTES) : secretProblems.bodyInvalid(MAX_SECRET_VALUE_BYTES);
}

function present(s: SecretListing) {
  return { name: s.name, keyId: s.keyId, createdAt: isoTime(s.createdAt), updatedAt: isoTime(s.updatedAt) };
}

secretRoutes.put("/:name", async (c) => {
  const name = checkedName(c.req.param("name"));
  const { json } = await readJsonBody(c.req.raw, MAX_SECRET_BODY_BYTES);
  const value = checkedValue(json);
  let keyring;
  try {
    keyring = await keyringFrom(c.env as unknown as Record<string, unknown>);
  } catch (error) {
    if (!(error instanceof MasterKeyError)) throw error;
    log.error("secrets.unavailable", { workspace: c.get("workspace"), error: error.message });
    throw secretProblems.masterKeyMissing();
  }
  const workspace = c.get("workspace");
  // A secret a Standard Webhooks event source signs with stays a `whsec_` secret (422 otherwise, nothing stored).
  await checkSecretForEventSources(c.env.DB, workspace, name, value);
  const sealed = await sealSecret(keyring, workspace, name, value);
  const stored = await putSealedSecret(c.env.DB, workspace, name, sealed, nowOf(c.env));
  return c.json(present(stored), 200, { "cache-control": "no-store" });
});

secretRoutes.get("/", async (c) => {
  const items = await listSecrets(c.env.DB, c.get("workspace"));
  return c.json({ items: items.map(present) });
});

secretRoutes.delete("/:name", async (c) => {
  const name = c.req.param("name");
  if (!(await deleteSecret(c.env.DB, c.get("workspace"), name))) {
    throw commonProblems.notFound(`Secret "${name}"`);
  }
  return c.body(null, 204);
});
