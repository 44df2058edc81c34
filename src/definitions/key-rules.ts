/**
 * The destination key's save-time rules (docs/definitions.md "Destination keys"): a declaration
 * must resolve (its profile's missing facts set, one place for the key), and what can be PROVEN not
 * to fit the destination is refused now rather than failing the first execution:
 *
 * - a literal `$idempotencyKey('prefix', …)` prefix that holds a character the destination's
 *   alphabet refuses, or leaves less room than the shortest safe digest (src/expressions/key-shape.ts);
 * - a key in a body field of a GET/HEAD step (no body), of a literal body that is not a JSON object,
 *   or of one whose literal members on the way are not objects, or that already sets that field;
 * - a body-field pointer through `__proto__`, `constructor` or `prototype`: names of a JavaScript
 *   object's prototype, not data (`prototypeTokenProblem`). A version saved before this rule still
 *   runs: the run-time walk reads and writes own members only (src/steps/gateway/body-key.ts).
 *
 * - a retry policy whose worst-case schedule outlasts the destination's retention: its last retries
 *   would meet the retention guard and fail (`retryOutlastsRetention`).
 *
 * What depends on data (a key built with `&`, a body computed by an expression) cannot be proven
 * here; it fails the step when it runs, not retried, with the same reason in words.
 */
import { compile } from "../expressions/evaluate";
import { keyShape } from "../expressions/key-shape";
import { allNodes, isNode, type AstNode } from "./ast";
import { resolveDestinationKey, retentionMarginMs, type DestinationKey } from "./destination-key";
import { asRecord, type ValidationError } from "./errors";
import { configPointer, gatewayConfigs } from "./step-configs";
import { DEFAULT_RETRY, GatewayConfig, inProgressBudgetMs, isExpression } from "./schema";
import { pointerTokens } from "../lib/json-pointer";
import { ownMember, PROTOTYPE_NAMES } from "../lib/own-member";

export function checkDestinationKeys(document: unknown): ValidationError[] {
  const errors: ValidationError[] = [];
  // Every Gateway: a top-level one and a MAP's step (src/definitions/step-configs.ts).
  for (const site of gatewayConfigs(document)) {
    const at = configPointer(site);
    // On the raw document: judged even when something else in the config fails the schema.
    const prototypeToken = prototypeTokenProblem(asRecord(site.config.idempotencyKey)?.bodyField);
    if (prototypeToken) errors.push({ pointer: at("idempotencyKey", "bodyField"), ...prototypeToken });
    // A config the schema refuses is reported by the schema; its key is judged once it parses.
    const parsed = GatewayConfig.safeParse(site.config);
    if (!parsed.success) continue;
    const resolved = resolveDestinationKey(parsed.data);
    if ("problems" in resolved) {
      for (const p of resolved.problems) errors.push({ pointer: at(...p.path), code: p.code, message: p.message });
      continue;
    }
    const key = resolved.key;
    // The original header form keeps its rules (1–255 printable ASCII, checked when it runs).
    if (key === null || key.declaredBy !== "declaration") continue;
    for (const problem of prefixProblems(key)) errors.push({ pointer: at("idempotencyKey", "value"), ...problem });
    const outlasts = retryOutlastsRetention(parsed.data, key);
    if (outlasts) errors.push({ pointer: at(parsed.data.retry ? "retry" : "idempotencyKey"), ...outlasts });
    if ("bodyField" in key.location) {
      const problem = bodyFieldProblem(parsed.data, key.location.bodyField);
      if (problem) errors.push({ pointer: at(...problem.path), code: problem.code, message: problem.message });
    }
  }
  return errors;
}

/** Every `$idempotencyKey('literal', …)` of the key expression whose prefix cannot fit the destination. */
function prefixProblems(key: DestinationKey): Array<{ code: string; message: string }> {
  let ast: AstNode;
  try {
    ast = compile(key.expression.slice(1)).ast() as unknown as AstNode;
  } catch {
    return []; // the compile check reports it
  }
  const problems: Array<{ code: string; message: string }> = [];
  for (const node of allNodes(ast)) {
    if (node.type !== "function" && node.type !== "partial") continue;
    const procedure = node.procedure;
    if (!isNode(procedure) || procedure.type !== "variable" || procedure.value !== "idempotencyKey") continue;
    const first = Array.isArray(node.arguments) ? (node.arguments[0] as unknown) : undefined;
    if (!isNode(first) || first.type !== "string" || typeof first.value !== "string") continue;
    const shaped = keyShape(first.value, key.constraints);
    if ("error" in shaped) {
      problems.push({
        code: "key-prefix-does-not-fit",
        message: `$idempotencyKey: ${shaped.error}. Every key this step builds would be refused; shorten or change the prefix`,
      });
    }
  }
  return problems;
}

/**
 * A body-field pointer with a token that names a JavaScript object's prototype. Refused although
 * the run-time walk is safe: such a member is almost always a mistake or a probe, and a destination
 * written in JavaScript may drop or mishandle it.
 */
function prototypeTokenProblem(pointer: unknown): { code: string; message: string } | null {
  if (typeof pointer !== "string") return null;
  const token = pointerTokens(pointer).find((t) => PROTOTYPE_NAMES.has(t));
  if (token === undefined) return null;
  return {
    code: "key-body-field-prototype",
    message:
      `the key's body field ${JSON.stringify(pointer)} goes through ${JSON.stringify(token)}, which names a JavaScript object's ` +
      `prototype, not a field (${[...PROTOTYPE_NAMES].map((n) => `\`${n}\``).join(", ")} are refused in a pointer); ` +
      "put the key in another member, such as `/idempotency_key`, or in a header",
  };
}

/** Why the key cannot go at `pointer` of this step's body, when the literal definition already proves it. */
function bodyFieldProblem(config: GatewayConfig, pointer: string): { path: Array<string | number>; code: string; message: string } | null {
  if (config.method === "GET" || config.method === "HEAD") {
    return {
      path: ["idempotencyKey", "bodyField"],
      code: "key-body-field-without-body",
      message: `a ${config.method} request has no body to carry the key; send it in a header (\`header\`) instead`,
    };
  }
  let value: unknown = config.body;
  const tokens = pointerTokens(pointer);
  for (const [depth, token] of tokens.entries()) {
    // An expression (or nothing) from here on: only the run can tell.
    if (value === undefined || isExpression(value)) return null;
    const where = depth === 0 ? "the body" : `the body's /${tokens.slice(0, depth).join("/")}`;
    if (value === null || typeof value !== "object" || Array.isArray(value)) {
      return {
        path: ["body", ...tokens.slice(0, depth)],
        code: "key-body-not-object",
        message: `the key travels in body field ${pointer}, but ${where} is not a JSON object; make it one, or send the key in a header`,
      };
    }
    // Own members only: `/toString` on a body without one is an absent field, not a built-in.
    value = ownMember(value, token);
  }
  if (value === undefined) return null;
  return {
    path: ["body", ...tokens],
    code: "key-body-field-set",
    message: `the declared key is placed at body field ${pointer} when the step runs; remove this value from \`body\``,
  };
}

/**
 * The longest a step's automatic attempts can keep sending its key after the first send: every
 * attempt's timeout, every wait between attempts at its ceiling (`maxDelayMs`, which also bounds a
 * `Retry-After` the step honours), and the whole in-progress budget. Operator retries and start
 * overs come later and are the run-time guard's to judge.
 */
export function worstCaseRetryMs(config: GatewayConfig): number {
  const policy = config.retry ?? DEFAULT_RETRY;
  return policy.maxAttempts * config.timeoutMs + (policy.maxAttempts - 1) * policy.maxDelayMs + inProgressBudgetMs(policy);
}

/** A retry schedule that can outlast what the destination remembers (less the guard's margin). */
function retryOutlastsRetention(config: GatewayConfig, key: DestinationKey): { code: string; message: string } | null {
  if (key.retentionMs === null) return null;
  const worst = worstCaseRetryMs(config);
  const usable = key.retentionMs - retentionMarginMs(key.retentionMs);
  if (worst < usable) return null;
  return {
    code: "retry-outlasts-retention",
    message:
      `the retry schedule can keep re-sending the key for ${seconds(worst)} (attempts × timeoutMs + waits at maxDelayMs, ` +
      `which also bounds Retry-After, + the in-progress budget), but the destination remembers keys for ` +
      `${seconds(key.retentionMs)} and the retention guard stops at ${seconds(usable)}: the last retries would be refused. ` +
      "Lower retry.maxAttempts, retry.maxDelayMs or retry.inProgressBudgetMs, or correct idempotencyKey.retention",
  };
}

const seconds = (ms: number) => `${Math.round(ms / 1000)} s`;
