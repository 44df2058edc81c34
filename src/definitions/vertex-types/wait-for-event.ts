/** WAIT_FOR_EVENT at save: a timeout of at most 365 days, each decision listed once (SPEC section 14). */
import type { ValidationError } from "../errors";
import { durationProblem, type VertexRules } from "../rule-helpers";

export const waitForEventRules: VertexRules = (config, at, _options) => {
  const errors: ValidationError[] = [];
  const timeout = durationProblem(config.timeout, "timeout");
  if (timeout) errors.push({ pointer: at("timeout"), ...timeout });
  const decisions = Array.isArray(config.decisions) ? config.decisions : [];
  const seen = new Set<unknown>();
  decisions.forEach((decision, i) => {
    if (seen.has(decision))
      errors.push({ pointer: at("decisions", i), code: "duplicate-decision", message: `"${String(decision)}" is listed twice` });
    seen.add(decision);
  });
  return errors;
};
