/**
 * The problems of the workspace secrets API (src/http/routes/secrets.ts). A refused write stores
 * nothing; none of them ever echoes a secret's value.
 */
import { ProblemError, type ProblemCatalog } from "../lib/problem";

export type SecretProblemCode = "secret-name-invalid" | "secret-name-reserved" | "secret-value-invalid" | "secrets-master-key-missing";

/** The one fix for a bad body or value: what a valid body looks like. */
const valueFix = (maxBytes: number) =>
  `Send \`{ "value": "…" }\`: a non-empty string of at most ${maxBytes} bytes (UTF-8) without control characters.`;

export const secretProblems = {
  nameInvalid: (name: string) =>
    new ProblemError({
      status: 422,
      code: "secret-name-invalid",
      title: "Invalid secret name",
      detail:
        `"${name}" is not a secret name: use letters, digits and \`_\`, not starting with a digit, at most 128 characters ` +
        `(the NAME of \`{{ secrets.NAME }}\`).`,
    }),
  nameReserved: (name: string) =>
    new ProblemError({
      status: 422,
      code: "secret-name-reserved",
      title: "Reserved secret name",
      detail: `${name} is one of idemflow's own credentials and cannot be a workspace secret; choose another name.`,
    }),
  /** The body is not exactly `{ "value": <string> }`. */
  bodyInvalid: (maxBytes: number) =>
    new ProblemError({ status: 422, code: "secret-value-invalid", title: "Invalid secret body", detail: valueFix(maxBytes) }),
  /** The value is empty, too long, or holds a character a header cannot carry. */
  valueInvalid: (maxBytes: number) =>
    new ProblemError({ status: 422, code: "secret-value-invalid", title: "Invalid secret value", detail: valueFix(maxBytes) }),
  /** The operator's to fix (the reason is logged, not answered); nothing was stored. */
  masterKeyMissing: () =>
    new ProblemError({
      status: 503,
      code: "secrets-master-key-missing",
      title: "Workspace secrets are not configured",
      detail:
        "The deployment has no valid SECRETS_MASTER_KEY, so secrets cannot be stored; the operator has been told. Nothing was " +
        "stored. Retry later.",
    }),
} satisfies ProblemCatalog<SecretProblemCode>;
