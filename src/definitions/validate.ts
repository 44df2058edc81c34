/**
 * `validateDefinition`: the one function that decides whether a workflow definition is valid.
 * The API (PUT /v1/workflows/{id}) and the CLI (`npm run validate`) both call exactly this.
 *
 * It reports every error at once, each with a JSON Pointer and a message that says what to do:
 * the zod schema's errors, then the rules a schema cannot state (graph, expressions, key lint,
 * secrets, per-vertex rules, the history retention). The latter run on the raw document,
 * defensively, so that a schema error in one vertex does not hide a cycle or a bad key elsewhere.
 */
import type { z } from "zod";
import { hasOwnMember, ownMember } from "../lib/own-member";
import { asRecord, type ValidationError } from "./errors";
import { checkExpressions } from "./expressions-check";
import { checkGraph } from "./graph";
import { checkHistory } from "./history-rules";
import { checkIdempotencyKeys } from "./key-lint";
import { checkDestinationKeys } from "./key-rules";
import { toPointer } from "./pointer";
import { WorkflowDefinition } from "./schema";
import { checkSecrets } from "./secrets";
import { checkVerifyProbes } from "./verify-rules";
import { checkVertexRules } from "./vertex-rules";
import { checkPrototypeMembers } from "./prototype-members";
import { checkKeylessWrites } from "./keyless-writes";
import { checkCompensations } from "./compensation-rules";

export type { ValidationError } from "./errors";

export interface ValidateOptions {
  /** The deployment's cron strings; when given, an ENTRY_POINT `schedule` must be one of them. */
  crons?: readonly string[];
}

/** A valid definition may still carry warnings (src/definitions/keyless-writes.ts): saved, and said. */
export type ValidationResult =
  { ok: true; definition: WorkflowDefinition; warnings: ValidationError[] } | { ok: false; errors: ValidationError[] };

export function validateDefinition(input: unknown, options: ValidateOptions = {}): ValidationResult {
  const errors: ValidationError[] = [];
  const parsed = WorkflowDefinition.safeParse(input);
  if (!parsed.success) for (const issue of parsed.error.issues) errors.push(...fromZodIssue(issue, input));
  errors.push(
    ...checkGraph(input),
    ...checkExpressions(input),
    ...checkIdempotencyKeys(input),
    ...checkDestinationKeys(input),
    ...checkSecrets(input),
    ...checkVertexRules(input, options),
    ...checkVerifyProbes(input),
    ...checkHistory(input),
    ...checkPrototypeMembers(input),
    ...checkCompensations(input),
  );
  const unique = dedupe(withoutRedundantPrototypeMembers(withoutRedundantVertexTypes(errors)));
  if (unique.length > 0 || !parsed.success) return { ok: false, errors: unique };
  // `$schema` is an editor hint: it is not stored and not part of the version, so moving a file
  // (which changes its relative `$schema` path) does not create a new version.
  const { $schema: _editorHint, ...definition } = parsed.data;
  return { ok: true, definition, warnings: checkKeylessWrites(input) };
}

/** Where another rule already refused the member (a strict object's `unknown-key`), that answer is enough. */
function withoutRedundantPrototypeMembers(errors: ValidationError[]): ValidationError[] {
  const refused = new Set(errors.filter((e) => e.code !== "prototype-member").map((e) => e.pointer));
  return errors.filter((e) => e.code !== "prototype-member" || !refused.has(e.pointer));
}

/** A MAP inside a MAP has its own answer (`map-nested`, src/definitions/vertex-types/map.ts): the schema's "not a step type" goes. */
function withoutRedundantVertexTypes(errors: ValidationError[]): ValidationError[] {
  const nested = new Set(errors.filter((e) => e.code === "map-nested").flatMap((e) => [e.pointer, e.pointer.replace(/\/type$/, "")]));
  return errors.filter((e) => e.code !== "invalid-vertex-type" || !nested.has(e.pointer));
}

function dedupe(errors: ValidationError[]): ValidationError[] {
  const seen = new Set<string>();
  return errors.filter((e) => {
    const key = `${e.pointer}\u0000${e.code}\u0000${e.message}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}

/** zod's issues, re-worded so each says what to do, one error per offending value. */
export function fromZodIssue(issue: z.core.$ZodIssue, input: unknown): ValidationError[] {
  const path = issue.path.filter((p): p is string | number => typeof p !== "symbol");
  const pointer = toPointer(path);
  const parent = valueAt(input, path.slice(0, -1));
  const last = path[path.length - 1];
  if (path.length > 0 && asRecord(parent) && !hasOwnMember(parent, String(last)) && issue.code !== "unrecognized_keys") {
    return [{ pointer, code: "required", message: `"${String(last)}" is required here; add it` }];
  }
  switch (issue.code) {
    case "unrecognized_keys":
      return issue.keys.map((key) => ({
        pointer: toPointer([...path, key]),
        code: "unknown-key",
        message:
          `"${key}" is not a known member here; remove it or fix its spelling (the JSON Schema in ` +
          `schema/workflow.schema.json lists the allowed members)`,
      }));
    case "invalid_union": {
      if ("discriminator" in issue && issue.discriminator === "type") {
        const options = ((issue as { options?: unknown[] }).options ?? []).map((o) => `"${String(o)}"`).join(", ");
        return [{ pointer, code: "invalid-vertex-type", message: `a vertex \`type\` must be one of ${options}` }];
      }
      const alternatives = issue.errors.map((branch) => branch.map((e) => e.message).join("; ")).filter((m) => m.length > 0);
      const message = `the value matches none of the allowed forms: ${alternatives.join(" — or — ")}`;
      return [{ pointer, code: "invalid-value", message }];
    }
    case "invalid_type":
      return [{ pointer, code: "invalid-type", message: `${issue.message.replace(/^Invalid input: /, "")}; change the value's type` }];
    case "invalid_key":
      return [
        {
          pointer,
          code: "invalid-key",
          message: `"${String(path[path.length - 1])}" is not allowed as a name here: ${issue.issues.map((i) => i.message).join("; ")}`,
        },
      ];
    default:
      return [
        { pointer, code: `invalid-${issue.code.replace(/_/g, "-")}`.replace(/^invalid-invalid-/, "invalid-"), message: issue.message },
      ];
  }
}

function valueAt(input: unknown, path: Array<string | number>): unknown {
  let value = input;
  for (const segment of path) value = ownMember(value, String(segment));
  return value;
}
