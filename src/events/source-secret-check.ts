/**
 * A workspace secret a Standard Webhooks event source signs with must stay a `whsec_` base64
 * secret: overwritten with anything else, every delivery to that source would answer 503 until
 * someone noticed. `PUT /v1/secrets/NAME` asks here first and refuses such a value (422
 * `secret-value-invalid`, naming the sources), storing nothing. A secret no such source uses may
 * hold anything.
 */
import { ProblemError } from "../lib/problem";
import { SECRET_TEMPLATE_SOURCE } from "../definitions/secrets";
import { listEventSources } from "./source-store";
import { webhookSecretKey } from "./standard-webhooks";

const TEMPLATE = new RegExp(`^\\s*${SECRET_TEMPLATE_SOURCE}\\s*$`);

/** The Standard Webhooks sources of `workspace` that sign with the secret `name`, by name. */
export async function webhookSourcesUsing(db: D1Database, workspace: string, name: string): Promise<string[]> {
  const sources = await listEventSources(db, workspace);
  return sources
    .filter((s) => s.definition.scheme === "standard-webhooks" && TEMPLATE.exec(s.definition.secret)?.[1] === name)
    .map((s) => s.name);
}

/** Throws 422 when `value` is not a `whsec_` base64 secret and a Standard Webhooks source of the workspace signs with `name`. */
export async function checkSecretForEventSources(db: D1Database, workspace: string, name: string, value: string): Promise<void> {
  if (webhookSecretKey(value) !== null) return;
  const sources = await webhookSourcesUsing(db, workspace, name);
  if (sources.length === 0) return;
  throw new ProblemError({
    status: 422,
    code: "secret-value-invalid",
    title: "Invalid secret value",
    detail:
      `${name} signs the Standard Webhooks event source${sources.length === 1 ? "" : "s"} ${sources.map((s) => `"${s}"`).join(", ")}, ` +
      "so its value must be the provider's `whsec_` secret (`whsec_` followed by base64, as the provider shows it); this value is " +
      "not, and every delivery would be refused. Nothing was stored. Send the `whsec_…` value, or point the sources at another " +
      "secret first.",
  });
}
