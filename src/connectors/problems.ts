/** The problems the connectors routes answer (SPEC section 15): each also means "nothing was saved". */
import type { ValidationError } from "../definitions/errors";
import { ProblemError, type ProblemCatalog } from "../lib/problem";

export type ConnectorProblemCode = "connector-invalid" | "keyless-write-refused";

export const connectorProblems = {
  invalid: (errors: ValidationError[]) =>
    new ProblemError({
      status: 422,
      code: "connector-invalid",
      title: "The connector is not valid",
      detail:
        `${errors.length} error${errors.length === 1 ? "" : "s"}; each names its place with a JSON Pointer. Fix them all ` +
        "and PUT again (`npm run validate -- connectors/name.json` checks offline).",
      extensions: { errors },
    }),
  keylessWriteRefused: (warnings: ValidationError[]) =>
    new ProblemError({
      status: 422,
      code: "keyless-write-refused",
      title: "A write without a key is refused in this workspace",
      detail:
        `${warnings.length} write${warnings.length === 1 ? "" : "s"} with neither a destination key nor a verify probe, and this ` +
        "deployment refuses them for this workspace (KEYLESS_WRITES_REFUSED). Declare `idempotencyKey`, go through a connector, " +
        "or add a `verify` probe; each is named with its JSON Pointer.",
      extensions: { errors: warnings },
    }),
} satisfies ProblemCatalog<ConnectorProblemCode>;
