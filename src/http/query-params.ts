/** Query parameters the list and stats routes share, with the problem each answers when malformed. */
import { executionProblems } from "../steps/problems";

/** An ISO 8601 date-time query parameter as ms since the epoch; undefined when absent. */
export function timeParam(value: string | undefined, name: string): number | undefined {
  if (value === undefined) return undefined;
  const ms = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}/.test(value) ? Date.parse(value) : NaN;
  if (!Number.isFinite(ms)) throw executionProblems.invalidTime(name, value);
  return ms;
}

/** A `true`/`false` query parameter; undefined when absent (false filters nothing, like absent). */
export function flagParam(value: string | undefined, name: string): boolean | undefined {
  if (value === undefined) return undefined;
  if (value !== "true" && value !== "false") throw executionProblems.invalidFlag(name, value);
  return value === "true";
}
