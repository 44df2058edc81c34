/**
 * What the public routes (`POST /hooks/{workspace}/{workflow}`, `POST /events/{workspace}/{source}`)
 * tell an anonymous caller. Anyone may send there, so nothing in an answer given before the
 * signature proved the caller holds the secret may tell which workspaces, workflows or sources
 * exist, or where a workspace lives:
 *
 * - an unknown workspace, workflow or source, a workflow without a public hook, and every signature
 *   refusal (missing, stale, unsupported scheme, not matching) answer the same 401
 *   `delivery-rejected`, whose body names nothing;
 * - the deployment's own problems — a shard misconfigured or behind on migrations, a workspace
 *   fenced during a move, a signing secret not set — answer the same 503 `delivery-unavailable`
 *   (Retry-After kept: a provider retries), never the workspace's name or its shards.
 *
 * The specific reason goes to the log, `public.refused` (info: anonymous noise) or
 * `public.unavailable` (warn: the operator's to fix), with the route, workspace and name as sent.
 * Answers after the signature passed (400, 413, 415, 422, the start's and the event's answers) are
 * the caller's own and pass unchanged.
 */
import { ingressProblems } from "../ingress/problems";
import { log } from "../lib/log";
import { ProblemError } from "../lib/problem";

const REFUSED = new Set([
  "hook-not-found",
  "webhook-signature-missing",
  "webhook-signature-stale",
  "webhook-signature-version-unsupported",
  "webhook-signature-invalid",
  "event-source-not-found",
  "event-signature-missing",
  "event-signature-stale",
  "event-signature-invalid",
]);

const UNAVAILABLE = new Set([
  "shards-misconfigured",
  "shard-schema-behind",
  "workspace-misplaced",
  "webhook-secret-missing",
  "event-source-unavailable",
]);

/** Where a public request was sent: its route and the names in its path, as sent (cut for the log). */
export interface PublicTarget {
  route: "hooks" | "events";
  workspace: string;
  name: string;
}

const cut = (text: string) => (text.length > 100 ? `${text.slice(0, 100)}…` : text);

/** The answer an anonymous caller gets for `error` (returned: the caller throws it). */
export function publicAnswer(error: unknown, target: PublicTarget): unknown {
  if (!(error instanceof ProblemError)) return error;
  const fields = { route: target.route, workspace: cut(target.workspace), name: cut(target.name), code: error.code, detail: error.detail };
  if (REFUSED.has(error.code)) {
    log.info("public.refused", fields);
    return ingressProblems.deliveryRejected();
  }
  if (UNAVAILABLE.has(error.code)) {
    log.warn("public.unavailable", { ...fields, ...error.extensions });
    return ingressProblems.deliveryUnavailable(error.headers["retry-after"] ?? "30");
  }
  return error;
}

/** Runs a public route's handler; whatever it throws reaches the caller as `publicAnswer` says. */
export async function answeringAnonymously<T>(target: PublicTarget, handler: () => Promise<T>): Promise<T> {
  try {
    return await handler();
  } catch (error) {
    throw publicAnswer(error, target);
  }
}
