/** The OpenAPI operations of the `secrets` area: the workspace's secrets, write-only (src/http/routes/secrets.ts). */
import { area, AUTH, DELETED, JSON_BODY, json, listing, merge, op } from "../operation";
import * as req from "../requests";
import * as res from "../responses";

export const SECRET_OPERATIONS = area("secrets", [
  listing("/v1/secrets", "listSecrets", "Names of the workspace's secrets with their times (never a value)", "the names", res.SecretList),
  op("put", "/v1/secrets/{name}", "putSecret", {
    summary: "Create or replace a workspace secret (write-only)",
    body: { schema: req.SecretBody, required: true, description: "exactly `{ value }`" },
    answers: { 200: json("stored", res.SecretListing) },
    problems: merge(AUTH, JSON_BODY, {
      422: ["secret-name-invalid", "secret-name-reserved", "secret-value-invalid"],
      503: ["secrets-master-key-missing"],
    }),
  }),
  op("delete", "/v1/secrets/{name}", "deleteSecret", {
    summary: "Delete a workspace secret",
    answers: DELETED,
    problems: merge(AUTH, { 404: ["not-found"] }),
  }),
]);
