/**
 * ENTRY_POINT at save: a dedupe window within the maximum, a payload limit D1 can hold, a schedule
 * that is a cron string the deployment fires.
 */
import { asString, type ValidationError } from "../errors";
import { durationProblem, type VertexRules } from "../rule-helpers";
import { MAX_PAYLOAD_BYTES_LIMIT } from "../schema";

export const entryPointRules: VertexRules = (config, at, options) => {
  const errors: ValidationError[] = [];
  const window = durationProblem(config.dedupeWindow, "dedupeWindow");
  if (window) errors.push({ pointer: at("dedupeWindow"), ...window });
  if (typeof config.maxPayloadBytes === "number" && config.maxPayloadBytes > MAX_PAYLOAD_BYTES_LIMIT) {
    errors.push({
      pointer: at("maxPayloadBytes"),
      code: "limit-above-d1",
      message:
        `maxPayloadBytes ${config.maxPayloadBytes} is above ${MAX_PAYLOAD_BYTES_LIMIT} (1 MiB), the most D1 can hold: the ` +
        `payload is stored in one row ` +
        "and loaded beside the outputs a step reads, and D1 refuses rows over 2,000,000 bytes; set it to 1048576 or less (or " +
        "leave it out for the 1 MiB default)",
    });
  }
  const schedule = asString(config.schedule);
  if (schedule !== undefined) {
    if (schedule.trim().split(/\s+/).length !== 5) {
      errors.push({
        pointer: at("schedule"),
        code: "invalid-cron",
        message: `"${schedule}" is not a cron string of 5 fields (minute hour day-of-month month day-of-week), e.g. "0 9 * * *"`,
      });
    } else if (options.crons && !options.crons.includes(schedule)) {
      errors.push({
        pointer: at("schedule"),
        code: "schedule-not-configured",
        message:
          `the cron "${schedule}" is not among this deployment's Cron Triggers ` +
          `(${options.crons.map((c) => `"${c}"`).join(", ") || "none"}); ` +
          "add it to wrangler.toml [triggers] crons and deploy, or use one of those",
      });
    }
  }
  return errors;
};
