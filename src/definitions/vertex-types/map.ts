/**
 * MAP at save (SPEC section 16, docs/definitions.md "MAP"): an item name that does not hide the
 * context's own names, no MAP inside a MAP (not yet), an output that fits a D1 row, and its step's
 * own rules — a GATEWAY step gets every rule a top-level GATEWAY gets, at pointers under
 * `step/config`. The rules that walk every Gateway (keys, key lint, secrets, verify probes, keyless
 * writes, expressions) find a MAP's step through src/definitions/step-configs.ts.
 */
import { asRecord, type ValidationError } from "../errors";
import type { VertexRules } from "../rule-helpers";
import { MAP_MAX_COLLECT_BYTES, MAP_MAX_ITEMS, MAP_MAX_OUTPUT_BYTES, MAP_DEFAULTS, MAP_RESERVED_NAMES } from "../schema";
import { gatewayRules } from "./gateway";

export const mapRules: VertexRules = (config, at, options) => {
  const errors: ValidationError[] = [];
  const name = config.as;
  if (typeof name === "string" && MAP_RESERVED_NAMES.has(name)) {
    errors.push({
      pointer: at("as"),
      code: "map-item-name-reserved",
      message:
        `"${name}" is a name the MAP's expressions already see (${[...MAP_RESERVED_NAMES].map((n) => `\`${n}\``).join(", ")}): ` +
        `the item would hide it, or it the item; name the item after what it is, e.g. "line"`,
    });
  }
  const step = asRecord(config.step);
  if (step?.type === "MAP") {
    errors.push({
      pointer: at("step", "type"),
      code: "map-nested",
      message:
        "a MAP inside a MAP is not supported yet: a MAP's step is one GATEWAY or one TRANSFORM per item. Flatten the list " +
        "in `items` (e.g. `= payload.orders.lines`, with the order's fields on each line), or start a workflow per outer item",
    });
  }
  const tooLarge = outputTooLarge(config.maxCollectBytes, config.maxItems);
  if (tooLarge) errors.push({ pointer: at("maxCollectBytes"), ...tooLarge });
  const stepConfig = asRecord(step?.config);
  if (step?.type === "GATEWAY" && stepConfig) errors.push(...gatewayRules(stepConfig, (...path) => at("step", "config", ...path), options));
  return errors;
};

/** The byte budget of the MAP's output, when both numbers are ones the schema accepts (else the schema's error stands alone). */
function outputTooLarge(maxCollectBytes: unknown, maxItems: unknown): { code: string; message: string } | null {
  const bytes = maxCollectBytes === undefined ? MAP_DEFAULTS.maxCollectBytes : maxCollectBytes;
  const items = maxItems === undefined ? MAP_DEFAULTS.maxItems : maxItems;
  if (!isCount(bytes, MAP_MAX_COLLECT_BYTES) || !isCount(items, MAP_MAX_ITEMS)) return null;
  const total = bytes * items;
  if (total <= MAP_MAX_OUTPUT_BYTES) return null;
  const n = (v: number) => v.toLocaleString("en-US");
  return {
    code: "map-output-too-large",
    message:
      `maxCollectBytes × maxItems = ${n(bytes)} × ${n(items)} = ${n(total)} bytes, past ${n(MAP_MAX_OUTPUT_BYTES)} (1.5 MB): ` +
      "the MAP's output (every item's collected value, in list order) is stored in one D1 row, and D1 refuses rows over " +
      `2,000,000 bytes. Lower maxCollectBytes to at most ${n(Math.floor(MAP_MAX_OUTPUT_BYTES / items))}, or maxItems to at ` +
      `most ${n(Math.floor(MAP_MAX_OUTPUT_BYTES / bytes))}`,
  };
}

const isCount = (value: unknown, max: number): value is number =>
  typeof value === "number" && Number.isInteger(value) && value >= 1 && value <= max;
