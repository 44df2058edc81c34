/**
 * Per-vertex rules that a JSON Schema cannot state: the workflow's vertex count, then each vertex's
 * own type's rules (src/definitions/vertex-types: one module per type — a GET/HEAD call has no
 * body, a DELAY sets `for` or `until`, a wait lists each decision once, a schedule is a cron string
 * the deployment fires, no duration is longer than `MAX_DURATION_MS`, …).
 */
import { asArray, asRecord, type ValidationError } from "./errors";
import { pointerOf } from "./pointer";
import type { VertexRuleOptions } from "./rule-helpers";
import { RULES } from "./vertex-types";

export { durationProblem, durationValueMs, literalUrlError, type VertexRuleOptions } from "./rule-helpers";

/**
 * The most vertices a workflow may have. One queue invocation handles up to 10 step messages
 * (wrangler.toml `max_batch_size`), and a settle batch decides every descendant of the settling
 * vertex in one statement each; with the claim batch, the key write and a heartbeat every 10 s of
 * a call of up to 300 s, a message costs at most about V + 40 queries. D1 allows 1,000 queries per
 * Worker invocation (SPEC section 11): 10 × (50 + 40) stays under it.
 */
export const MAX_VERTICES = 50;

export function checkVertexRules(document: unknown, options: VertexRuleOptions = {}): ValidationError[] {
  const errors: ValidationError[] = [];
  const count = asArray(asRecord(document)?.vertices).length;
  if (count > MAX_VERTICES) {
    errors.push({
      pointer: "/vertices",
      code: "too-many-vertices",
      message:
        `the workflow has ${count} vertices, more than ${MAX_VERTICES}: a queue invocation settles up to 10 steps, each deciding ` +
        `every descendant in its own statement, ` +
        "and D1 allows 1,000 queries per Worker invocation; split the workflow in two (the first one's last step can trigger the second)",
    });
  }
  asArray(asRecord(document)?.vertices).forEach((raw, i) => {
    const vertex = asRecord(raw);
    const config = asRecord(vertex?.config);
    if (!config) return;
    const at = (...path: Array<string | number>) => pointerOf("vertices", i, "config", ...path);
    const rules = vertex && typeof vertex.type === "string" ? RULES.get(vertex.type) : undefined;
    if (rules) errors.push(...rules(config, at, options));
  });
  return errors;
}
