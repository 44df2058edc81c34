/**
 * A verified delivery → the event it carries, by the source's expressions (JSONata, bounded like
 * every expression of the engine: src/expressions/evaluate.ts) over
 *
 *     { "body": <the JSON body as sent>, "headers": { <signed header, lowercase>: <value> } }
 *
 * `headers` holds only what the signature covers — `webhook-id` and `webhook-timestamp` under
 * Standard Webhooks, `x-idemflow-timestamp` under v1 — never an unsigned header: a captured
 * delivery replayed within the tolerance with other headers must not become another event (another
 * name, id or correlation value), just as a hook lets no unsigned input choose an identity.
 *
 * Every member is checked here and named when it fails (422 `event-extract-failed`), before
 * anything is written; a provider's retry succeeds once the source is corrected.
 */
import { EVENT_NAME_PATTERN, isExpression } from "../definitions/schema";
import { ExpressionError, evaluateValue } from "../expressions/evaluate";
import { canonicalJson } from "../lib/canonical-json";
import { sha256Hex } from "../lib/crypto";
import { DEFAULT_KEY_CONSTRAINTS, validateKey } from "../lib/key-constraints";
import { setOwnMember } from "../lib/own-member";
import { correlationOf } from "../lib/correlation";
import { MAX_EVENT_DATA_BYTES, type EventInput } from "./ingest";
import { eventProblems } from "./problems";
import type { EventSourceDefinition } from "./source-definition";
import type { VerifiedDelivery } from "./source-signature";

/** What a value looked like, for a refusal: JSON, cut at 120 characters. */
function shown(value: unknown): string {
  if (value === undefined) return "nothing";
  const text = JSON.stringify(value);
  return text.length > 120 ? `${text.slice(0, 120)}…` : text;
}

export async function extractEvent(
  source: { name: string; definition: EventSourceDefinition },
  body: unknown,
  delivery: VerifiedDelivery,
): Promise<Required<Pick<EventInput, "name" | "match">> & Pick<EventInput, "id" | "data"> & { idScope?: string }> {
  const headers: Record<string, string> = {};
  for (const [name, value] of delivery.headers) setOwnMember(headers, name, value);
  const context = { body, headers };
  const failed = (member: string, detail: string) => eventProblems.extractFailed(source.name, member, detail);
  const run = async (member: string, value: string): Promise<unknown> => {
    try {
      return await evaluateValue(value, context);
    } catch (error) {
      if (error instanceof ExpressionError) throw failed(member, `failed on this webhook: ${error.message}`);
      throw error;
    }
  };
  const { definition } = source;

  const name = isExpression(definition.name) ? await run("name", definition.name) : definition.name;
  if (typeof name !== "string" || !EVENT_NAME_PATTERN.test(name)) {
    throw failed("name", `gave ${shown(name)}; it must give an event name (letters, digits, \`.\`, \`_\`, \`:\` or \`-\`, at most 200)`);
  }

  const match = await run("match", definition.match);
  const correlation = await correlationOf(match);
  if ("problem" in correlation) throw failed("match", `gave ${shown(match)}: ${correlation.problem}`);

  let id: string | undefined = delivery.id;
  // The signed `webhook-id` is the id, in the secret's id space; an id the source's own expression gives is in the source's.
  let idScope = delivery.idScope;
  if (definition.id !== undefined) {
    const value = await run("id", definition.id);
    id = typeof value === "number" && Number.isSafeInteger(value) ? String(value) : typeof value === "string" ? value : undefined;
    if (id === undefined) throw failed("id", `gave ${shown(value)}; it must give the sender's event id, a string (or an integer)`);
    idScope = undefined;
  } else if (id !== undefined && !validateKey(id, DEFAULT_KEY_CONSTRAINTS).ok) {
    // A signed `webhook-id` longer than 255 characters (or not printable ASCII) is the provider's, not the
    // source's to fix: refusing it would be retried for ever. Its SHA-256 stands in (the same id, the same
    // stand-in: its retries still deduplicate).
    id = `webhook-id-sha256:${await sha256Hex(id)}`;
  }
  if (id !== undefined && !validateKey(id, DEFAULT_KEY_CONSTRAINTS).ok) {
    throw failed("id", `is ${shown(id)}; an event id is 1 to 255 printable ASCII characters`);
  }

  const data = definition.data === undefined ? body : await run("data", definition.data);
  if (data !== undefined && new TextEncoder().encode(canonicalJson(data)).byteLength > MAX_EVENT_DATA_BYTES) {
    throw failed("data", `is over ${MAX_EVENT_DATA_BYTES} bytes as JSON; select the part a workflow needs with \`data\``);
  }
  return {
    name,
    match: match as string | number,
    ...(id === undefined ? {} : { id }),
    ...(data === undefined ? {} : { data }),
    ...(id === undefined || idScope === undefined ? {} : { idScope }),
  };
}
