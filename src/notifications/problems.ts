/**
 * The problems of the notification setting (PUT /v1/notifications). Every refusal names the member
 * at fault with a JSON Pointer (`pointer`) and stores nothing; none echoes a secret's value.
 */
import { ProblemError, type ProblemCatalog } from "../lib/problem";

export type NotificationProblemCode = "notification-setting-invalid";

const invalid = (pointer: string, detail: string) =>
  new ProblemError({
    status: 422,
    code: "notification-setting-invalid",
    title: "Invalid notification setting",
    detail: `${detail} Nothing was saved.`,
    extensions: { pointer },
  });

export const notificationProblems = {
  /** Any shape problem: a missing or extra member, a wrong type. */
  shape: (pointer: string, message: string) => invalid(pointer, message),
  urlNotAllowed: (host: string, hostPort: string) =>
    invalid("/url", `${host} is not on OUTBOUND_ALLOWLIST: notifications go only where a destination may; add "${hostPort}" to it.`),
  secretInClear: () =>
    invalid(
      "/secret",
      "`secret` is the NAME of a workspace secret holding the Standard Webhooks `whsec_…` secret, never the secret itself: " +
        'store it with `PUT /v1/secrets/NAME` and send `"secret": "NAME"`. The value sent was not kept.',
    ),
  secretMissing: (name: string) =>
    invalid("/secret", `the workspace has no secret ${name}: store the \`whsec_…\` secret with \`PUT /v1/secrets/${name}\` first.`),
  secretNotWebhook: (name: string) =>
    invalid("/secret", `the secret ${name} is not a Standard Webhooks secret (\`whsec_\` followed by base64); replace its value first.`),
  eventUnknown: (index: number, value: string, known: readonly string[]) =>
    invalid(`/events/${index}`, `"${value}" is not a notification event: use any of ${known.map((k) => `"${k}"`).join(", ")}.`),
  stuckThresholdMissing: () =>
    invalid("/stuckAfterSeconds", "`execution.stuck` needs `stuckAfterSeconds`: how long a step may wait before it is reported."),
} satisfies ProblemCatalog<NotificationProblemCode>;
