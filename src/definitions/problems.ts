/**
 * The problems of the workflow definitions API (src/http/routes/workflows.ts): saving an invalid
 * definition, and reading or listing with a bad query parameter.
 */
import { ProblemError, type ProblemCatalog } from "../lib/problem";
import type { ValidationError } from "./errors";

export type DefinitionProblemCode = "invalid-definition" | "invalid-version" | "invalid-limit";

export const definitionProblems = {
  /** Every error at once, each with its JSON Pointer, so one round of fixes is enough. */
  invalidDefinition: (errors: ValidationError[]) =>
    new ProblemError({
      status: 422,
      code: "invalid-definition",
      title: "The workflow definition is not valid",
      detail:
        `${errors.length} error${errors.length === 1 ? "" : "s"}; each names its place with a JSON Pointer. Fix them all ` +
        `and PUT again (\`npm run validate -- file.json\` checks offline).`,
      extensions: { errors },
    }),
  invalidVersion: () =>
    new ProblemError({
      status: 400,
      code: "invalid-version",
      title: "Invalid version",
      detail: "`version` is the 64-character lowercase hex SHA-256 returned when the definition was saved.",
    }),
  invalidLimit: () =>
    new ProblemError({ status: 400, code: "invalid-limit", title: "Invalid limit", detail: "`limit` is an integer from 1 to 500." }),
} satisfies ProblemCatalog<DefinitionProblemCode>;
