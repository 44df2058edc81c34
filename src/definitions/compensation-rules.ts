/**
 * A GATEWAY's `compensate` at save (SPEC section 18, docs/steps.md "Compensation"): the undo is a
 * write (`compensation-not-a-write` for GET/HEAD), it has its own key (`compensation-key-missing`:
 * neither `idempotencyKey` nor an `Idempotency-Key` header), and that key is not the step's
 * (`compensation-key-equals-step-key`: the undo would replay the call it undoes; through a connector,
 * an undo whose `operation` is the step's makes the step's key). `path`, `operation` and `keyFields`
 * outside a connector step are refused (`compensation-connector-member`). A MAP's step may declare
 * one (each completed item undone, its key per item). Its expressions are
 * expression sites (./expression-sites.ts), so the compile check, the key lint and the step-inputs
 * analysis see them as the step's own.
 */
import { asRecord, asString, type ValidationError } from "./errors";
import { isIdempotencyKeyHeader } from "./expression-sites";
import { pointerOf } from "./pointer";
import { MAP_DEFAULTS } from "./schema";
import { stepConfigs, type StepConfigSite } from "./step-configs";

/**
 * The most undo steps one execution can be given: the trigger that inserts them
 * (`executions_compensation_starts`, migrations/0034) keeps this many, latest-completed first. A
 * definition that could complete more compensable calls is refused at save
 * (`compensation-too-many-undos`), so no completed call is ever left undone by the cap.
 */
export const MAX_UNDO_STEPS = 1000;

/** The undo steps a compensable site can add: 1 for a step, the MAP's `maxItems` for a MAP's step. */
function undosOf(document: unknown, site: StepConfigSite): number {
  if (!site.map) return 1;
  const vertices = asRecord(document)?.vertices;
  const mapConfig = Array.isArray(vertices) ? asRecord(asRecord(vertices[site.map.vertexIndex])?.config) : undefined;
  const maxItems = mapConfig?.maxItems;
  return typeof maxItems === "number" && Number.isFinite(maxItems) ? maxItems : MAP_DEFAULTS.maxItems;
}

/** A key expression as compared: its text without white space. */
const normalised = (value: string) => value.replace(/\s+/g, "");

/** The key a Gateway config (or its `compensate`) declares: the declaration's value, else an Idempotency-Key header's. */
function keyOf(config: Record<string, unknown>): { value: string; path: string[] } | null {
  const declared = asString(asRecord(config.idempotencyKey)?.value);
  if (declared !== undefined) return { value: declared, path: ["idempotencyKey", "value"] };
  for (const [name, value] of Object.entries(asRecord(config.headers) ?? {})) {
    if (isIdempotencyKeyHeader(name) && typeof value === "string") return { value, path: ["headers", name] };
  }
  return null;
}

export function checkCompensations(document: unknown): ValidationError[] {
  const errors: ValidationError[] = [];
  let undos = 0;
  for (const site of stepConfigs(document)) {
    if (site.type !== "GATEWAY") continue;
    const compensate = asRecord(site.config.compensate);
    if (!compensate) continue;
    const at = (...path: string[]) => pointerOf(...site.base, "compensate", ...path);
    const before = undos;
    undos += undosOf(document, site);
    if (before <= MAX_UNDO_STEPS && undos > MAX_UNDO_STEPS) {
      errors.push({
        pointer: at(),
        code: "compensation-too-many-undos",
        message:
          `this workflow could complete ${undos.toLocaleString("en-US")} compensable calls by here (each compensable step ` +
          `counts 1, a MAP's compensable step its maxItems), past the ${MAX_UNDO_STEPS.toLocaleString("en-US")} undo steps ` +
          "one execution can run: lower a compensable MAP's maxItems, or compensate fewer steps",
      });
    }
    // A MAP's step may declare one: each COMPLETED item gets its undo, keyed per item (the MAP key lint
    // — map-item-key-ignores-item, map-item-key-from-index — judges the undo's key as the item's own).
    // `path`, `operation` and `keyFields` are an undo through the step's connector: the save resolves them
    // (src/connectors/resolve.ts) and removes them. Left here, the step names no connector.
    const unresolved = ["path", "operation", "keyFields"].filter((m) => Object.hasOwn(compensate, m));
    if (unresolved.length > 0) {
      errors.push({
        pointer: at(unresolved[0]!),
        code: "compensation-connector-member",
        message:
          `\`${unresolved.join("`, `")}\` make an undo through the step's connector, and this step names none: give the ` +
          "step `connector`, or give the undo its own `url` and `idempotencyKey`",
      });
      continue;
    }
    const method = asString(compensate.method);
    if (method === "GET" || method === "HEAD") {
      errors.push({
        pointer: at("method"),
        code: "compensation-not-a-write",
        message: `a ${method} changes nothing, so it cannot undo this step; use the destination's undo call (POST, PUT, PATCH or DELETE)`,
      });
    }
    const key = keyOf(compensate);
    if (key === null) {
      errors.push({
        pointer: at(),
        code: "compensation-key-missing",
        message:
          "an undo call needs its own destination key, or a retried undo (its response lost) could refund twice: add " +
          '`idempotencyKey: { "value": "= $idempotencyKey(\'refund\', payload.order.id)" }` from business data',
      });
      continue;
    }
    const stepKey = keyOf(site.config);
    if (stepKey !== null && normalised(stepKey.value) === normalised(key.value)) {
      errors.push({
        pointer: at(...key.path),
        code: "compensation-key-equals-step-key",
        message:
          `the undo's key is the step's own (${stepKey.value}): the destination would answer the undo with the call it ` +
          "undoes (a replay), not undo it; give it its own prefix, e.g. `$idempotencyKey('refund', …)` for a `charge`",
      });
    }
  }
  return errors;
}
