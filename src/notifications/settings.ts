/**
 * The workspace's notification setting (PUT/GET /v1/notifications): checked here, stored in
 * `notification_settings` (one row per workspace). The secret is held by NAME only: the value
 * stays in the workspace's sealed secrets (src/secrets/*) and is opened at delivery.
 */
import { hostPortOf, isAllowed } from "../lib/allowlist";
import { SECRET_NAME_PATTERN } from "../definitions/secrets";
import { isGranted, RESERVED_SECRETS } from "../secrets/resolve";
import { webhookSecretKey } from "../events/standard-webhooks";
import { isNotificationEvent, NOTIFICATION_EVENTS, type NotificationEvent } from "./events";
import { notificationProblems } from "./problems";

export interface NotificationSettings {
  url: string;
  /** The NAME of the workspace secret that signs. */
  secret: string;
  events: NotificationEvent[];
  /** `execution.stuck`: how long a step may wait before it is reported; null without that event. */
  stuckAfterMs: number | null;
}

export interface StoredNotificationSettings extends NotificationSettings {
  createdAt: number;
  updatedAt: number;
}

const MEMBERS = new Set(["url", "secret", "events", "stuckAfterSeconds"]);
/** A week: a wait reported later than that is not a notification any more. */
export const MAX_STUCK_AFTER_SECONDS = 7 * 24 * 3600;
export const MIN_STUCK_AFTER_SECONDS = 60;
const MAX_URL_LENGTH = 2048;

/**
 * The body's setting, or the first problem (a 422 with its pointer). `allowlist` is
 * OUTBOUND_ALLOWLIST; whether the secret exists is the caller's next check (`checkSecretOnRecord`).
 */
export function parseNotificationSettings(json: unknown, allowlist: string | undefined): NotificationSettings {
  if (json === null || typeof json !== "object" || Array.isArray(json)) {
    throw notificationProblems.shape("", 'Send `{ "url": …, "secret": "SECRET_NAME", "events": [ … ] }`.');
  }
  const body = json as Record<string, unknown>;
  for (const name of Object.keys(body)) {
    if (!MEMBERS.has(name))
      throw notificationProblems.shape(`/${name}`, `"${name}" is not a member of the setting: url, secret, events, stuckAfterSeconds.`);
  }
  const url = checkedUrl(body.url, allowlist);
  const secret = checkedSecretName(body.secret);
  const events = checkedEvents(body.events);
  const stuck = body.stuckAfterSeconds;
  let stuckAfterMs: number | null = null;
  if (stuck !== undefined) {
    if (typeof stuck !== "number" || !Number.isInteger(stuck) || stuck < MIN_STUCK_AFTER_SECONDS || stuck > MAX_STUCK_AFTER_SECONDS) {
      throw notificationProblems.shape(
        "/stuckAfterSeconds",
        `\`stuckAfterSeconds\` is a whole number of seconds from ${MIN_STUCK_AFTER_SECONDS} to ${MAX_STUCK_AFTER_SECONDS}.`,
      );
    }
    stuckAfterMs = stuck * 1000;
  }
  if (events.includes("execution.stuck") && stuckAfterMs === null) throw notificationProblems.stuckThresholdMissing();
  return { url, secret, events, stuckAfterMs: events.includes("execution.stuck") ? stuckAfterMs : null };
}

function checkedUrl(value: unknown, allowlist: string | undefined): string {
  let url: URL;
  try {
    if (typeof value !== "string" || value.length > MAX_URL_LENGTH) throw new Error();
    url = new URL(value);
    if (url.protocol !== "https:" && url.protocol !== "http:") throw new Error();
  } catch {
    throw notificationProblems.shape("/url", `\`url\` is an absolute http(s) URL of at most ${MAX_URL_LENGTH} characters.`);
  }
  if (url.username !== "" || url.password !== "") {
    throw notificationProblems.shape("/url", "`url` carries no credentials: the signature authenticates the notification.");
  }
  if (!isAllowed(url, allowlist)) throw notificationProblems.urlNotAllowed(url.host, hostPortOf(url));
  return url.toString();
}

function checkedSecretName(value: unknown): string {
  if (typeof value !== "string" || value === "") {
    throw notificationProblems.shape("/secret", "`secret` is the NAME of a workspace secret (`PUT /v1/secrets/NAME`).");
  }
  // A `whsec_…` value, or anything that is not a name but would sign (base64), is the secret itself.
  if (value.startsWith("whsec_") || (!SECRET_NAME_PATTERN.test(value) && webhookSecretKey(value) !== null)) {
    throw notificationProblems.secretInClear();
  }
  if (!SECRET_NAME_PATTERN.test(value) || RESERVED_SECRETS.has(value)) {
    throw notificationProblems.shape("/secret", `"${value}" is not a secret name: letters, digits and \`_\`, not starting with a digit.`);
  }
  return value;
}

function checkedEvents(value: unknown): NotificationEvent[] {
  if (!Array.isArray(value) || value.length === 0) {
    throw notificationProblems.shape("/events", `\`events\` is a non-empty array of: ${NOTIFICATION_EVENTS.join(", ")}.`);
  }
  const out: NotificationEvent[] = [];
  value.forEach((event: unknown, i) => {
    if (!isNotificationEvent(event)) throw notificationProblems.eventUnknown(i, String(event), NOTIFICATION_EVENTS);
    if (!out.includes(event)) out.push(event);
  });
  return out;
}

/**
 * The named secret must be the workspace's own (or granted to it by the deployment), and — when
 * the value can be opened here — a `whsec_` secret. Another workspace's secret of the same name is
 * never seen: the read is by (this workspace, name).
 */
export async function checkSecretOnRecord(
  db: D1Database,
  env: Record<string, unknown>,
  workspace: string,
  name: string,
  open: (row: { keyId: string; iv: string; ciphertext: string }) => Promise<string | null>,
): Promise<void> {
  const row = await db
    .prepare("SELECT key_id AS keyId, iv, ciphertext FROM workspace_secrets WHERE workspace = ?1 AND name = ?2")
    .bind(workspace, name)
    .first<{ keyId: string; iv: string; ciphertext: string }>();
  if (row === null) {
    const worker = env[name];
    if (isGranted(env, workspace, name) && typeof worker === "string") {
      if (webhookSecretKey(worker) === null) throw notificationProblems.secretNotWebhook(name);
      return;
    }
    throw notificationProblems.secretMissing(name);
  }
  const value = await open(row);
  if (value !== null && webhookSecretKey(value) === null) throw notificationProblems.secretNotWebhook(name);
}

export async function putNotificationSettings(
  db: D1Database,
  workspace: string,
  s: NotificationSettings,
  now: number,
): Promise<StoredNotificationSettings> {
  const row = await db
    .prepare(
      `INSERT INTO notification_settings (workspace, url, secret_name, events, stuck_after_ms, created_at, updated_at)
       VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6)
       ON CONFLICT (workspace) DO UPDATE
         SET url = excluded.url, secret_name = excluded.secret_name, events = excluded.events,
             stuck_after_ms = excluded.stuck_after_ms, updated_at = excluded.updated_at
       RETURNING ${COLUMNS}`,
    )
    .bind(workspace, s.url, s.secret, JSON.stringify(s.events), s.stuckAfterMs, now)
    .first<Row>();
  return fromRow(row!);
}

export async function getNotificationSettings(db: D1Database, workspace: string): Promise<StoredNotificationSettings | null> {
  const row = await db.prepare(`SELECT ${COLUMNS} FROM notification_settings WHERE workspace = ?1`).bind(workspace).first<Row>();
  return row === null ? null : fromRow(row);
}

/** True when a setting was deleted. */
export async function deleteNotificationSettings(db: D1Database, workspace: string): Promise<boolean> {
  return (await db.prepare("DELETE FROM notification_settings WHERE workspace = ?1 RETURNING workspace").bind(workspace).first()) !== null;
}

const COLUMNS = "url, secret_name, events, stuck_after_ms, created_at, updated_at";

interface Row {
  url: string;
  secret_name: string;
  events: string;
  stuck_after_ms: number | null;
  created_at: number;
  updated_at: number;
}

function fromRow(r: Row): StoredNotificationSettings {
  return {
    url: r.url,
    secret: r.secret_name,
    events: JSON.parse(r.events) as NotificationEvent[],
    stuckAfterMs: r.stuck_after_ms,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
  };
}
