/** DELAY at save: exactly one of `for` and `until`, and `for` at most 365 days (SPEC section 14). */
import type { ValidationError } from "../errors";
import { durationProblem, type VertexRules } from "../rule-helpers";

export const delayRules: VertexRules = (config, at, _options) => {
  const errors: ValidationError[] = [];
  const given = ["for", "until"].filter((name) => config[name] !== undefined);
  if (given.length !== 1) {
    errors.push({
      pointer: at(),
      code: "delay-for-or-until",
      message:
        given.length === 0
          ? 'a DELAY needs `for` (a duration, e.g. "3d") or `until` (an expression giving the time to wake)'
          : "a DELAY takes `for` or `until`, not both; keep one",
    });
  }
  const sleep = durationProblem(config.for, "for");
  if (sleep) errors.push({ pointer: at("for"), ...sleep });
  return errors;
};
