/**
 * Delivering an event (SPEC section 14, docs/waits.md): check it, key it for deduplication, and
 * run the one delivery batch (src/ledger/events.ts `deliverEvent`) on the workspace's shard; then,
 * after the commit, send the messages of the waits it un-parked. Used by `POST /v1/events` and by
 * the event sources' public route.
 *
 * The dedupe key: the sender's `id` when given (`id:<source>:<id>`), else the content — SHA-256 of the
 * canonical JSON of `[name, correlation, data]` (`content:<hash>`), which deduplicates within
 * EVENT_DEDUPE_WINDOW: the same content a window later is a new event.
 */
import { EVENT_NAME_PATTERN } from "../definitions/schema";
import { deliverEvent, type DeliveredEvent } from "../ledger";
import { canonicalJson } from "../lib/canonical-json";
import { sha256Hex, toHex } from "../lib/crypto";
import { DEFAULT_KEY_CONSTRAINTS, validateKey } from "../lib/key-constraints";
import { log } from "../lib/log";
import { sendStepMessages } from "../steps/dispatch";
import type { StepQueue } from "../steps/runtime";
import { correlationOf } from "../lib/correlation";
import { eventProblems } from "./problems";
import { eventSettings } from "./settings";

/** The most bytes an event's data may have as canonical JSON (the column's CHECK: 256 KiB). */
export const MAX_EVENT_DATA_BYTES = 262_144;

/** An event as sent: checked here, member by member. */
export interface EventInput {
  name: unknown;
  match: unknown;
  id?: unknown;
  data?: unknown;
}

export interface EventContext {
  db: D1Database;
  queue: StepQueue;
  vars: Record<string, unknown>;
  workspace: string;
  /** The event source it came through, or null for POST /v1/events. */
  source: string | null;
  /**
   * The id space of the event's `id` when it is not the source's (src/events/source-signature.ts
   * `idScope`: a Standard Webhooks `webhook-id` is the signing secret's). Never from a request body.
   */
  idScope?: string;
  now: number;
}

/** What a delivery answers (SPEC section 14): 202 for a new event, 200 for a duplicate. */
export interface EventAnswer {
  eventId: string;
  name: string;
  match: string | number;
  deduplicated: boolean;
  /** Executions the first delivery resumed. */
  resumed: string[];
  /** Nothing took it at its first delivery: it waits for a wait until `bufferedUntil`. */
  buffered: boolean;
  bufferedUntil: string;
  receivedAt: string;
  duplicates: number;
}

export async function ingestEvent(input: EventInput, ctx: EventContext): Promise<{ answer: EventAnswer; delivered: DeliveredEvent }> {
  const { name, match, id, data } = checked(input);
  const correlation = await correlationOf(match);
  if ("problem" in correlation) throw eventProblems.invalid("/match", correlation.problem);
  const dataJson = data === undefined ? null : canonicalJson(data);
  if (dataJson !== null && new TextEncoder().encode(dataJson).byteLength > MAX_EVENT_DATA_BYTES) {
    throw eventProblems.invalid(
      "/data",
      `it is over ${MAX_EVENT_DATA_BYTES} bytes as JSON; send the ids a workflow needs, not the document`,
    );
  }
  const settings = eventSettings(ctx.vars as never);
  // A sender's id is unique in its sender's space: an event source's ids are kept apart from another
  // source's and from the API's (two providers may both number their webhooks from 1). A Standard
  // Webhooks `webhook-id` is in its signing secret's space (`~sw-…`, never a source name): one message
  // replayed to two sources that share the secret is one event.
  const scope = ctx.idScope ?? ctx.source ?? "";
  const eventKey =
    id !== undefined ? `id:${scope}:${id}` : `content:${await sha256Hex(canonicalJson([name, correlation.value, dataJson]))}`;
  const delivered = await deliverEvent(ctx.db, {
    workspace: ctx.workspace,
    eventKey,
    contentWindowMs: id !== undefined ? null : settings.dedupeWindowMs,
    eventId: id ?? `evt_${eventKey.slice("content:".length, "content:".length + 24)}_${ctx.now}`,
    name,
    matchHash: correlation.hash,
    matchValue: correlation.value,
    data: dataJson,
    source: ctx.source,
    now: ctx.now,
    bufferedUntil: ctx.now + settings.bufferMs,
    nonce: toHex(crypto.getRandomValues(new Uint8Array(16))),
  });
  // The waits it took were un-parked in the batch: their messages go now (a lost one: the cron's wake-up task).
  await sendStepMessages(ctx.queue, delivered.unparked);
  log.info(delivered.duplicate ? "events.duplicate" : "events.delivered", {
    workspace: ctx.workspace,
    eventId: delivered.eventId,
    name,
    source: ctx.source,
    resumed: delivered.resumed.length,
  });
  // A duplicate answers with the event AS STORED (docs/waits.md "Deduplication"): an id reused with other
  // content is not stored again, and the answer shows what the id holds — never the content just sent.
  // (An erased event's record holds no content: the answer then repeats what was sent, and says nothing was buffered.)
  const asStored = delivered.duplicate && !delivered.erased;
  if (asStored && (delivered.stored.name !== name || delivered.stored.matchHash !== correlation.hash)) {
    log.warn("events.id_reused", {
      workspace: ctx.workspace,
      eventId: delivered.eventId,
      source: ctx.source,
      message: `event id ${delivered.eventId} was sent again with another name or correlation value: answered with the stored event`,
    });
  }
  const iso = (ms: number) => new Date(ms).toISOString();
  return {
    delivered,
    answer: {
      eventId: delivered.eventId,
      name: asStored ? delivered.stored.name : name,
      match: asStored ? (JSON.parse(delivered.stored.matchValue) as string | number) : match,
      deduplicated: delivered.duplicate,
      resumed: delivered.resumed,
      buffered: delivered.resumed.length === 0 && !delivered.erased,
      bufferedUntil: iso(delivered.bufferedUntil),
      receivedAt: iso(delivered.receivedAt),
      duplicates: delivered.duplicates,
    },
  };
}

function checked(input: EventInput): { name: string; match: string | number; id: string | undefined; data: unknown } {
  const { name, match, id, data } = input;
  if (typeof name !== "string" || !EVENT_NAME_PATTERN.test(name)) {
    throw eventProblems.invalid(
      "/name",
      "give the event's name: letters, digits, `.`, `_`, `:` or `-`, starting with a letter or digit (at most 200)",
    );
  }
  if (typeof match !== "string" && typeof match !== "number") {
    throw eventProblems.invalid("/match", "give the correlation value a wait matches on: a string or a number (an order id, a charge id)");
  }
  if (id !== undefined && (typeof id !== "string" || !validateKey(id, DEFAULT_KEY_CONSTRAINTS).ok)) {
    throw eventProblems.invalid(
      "/id",
      "an event id is 1 to 255 printable ASCII characters (the sender's own id, so its retries deduplicate)",
    );
  }
  return { name, match, id: id as string | undefined, data };
}
