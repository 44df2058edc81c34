/**
 * `HISTORY_ARCHIVE` (wrangler.toml [vars], docs/history-archive.md): whether the history sweep
 * archives a trace to the `ARCHIVE` bucket before it removes the rows.
 *
 * `"on"` and `"off"` (any case, spaces around ignored) say so; unset or empty is off. Any other
 * value (`"true"`, `"yes"`, a typo) is not guessed at silently: it is logged once per isolate and
 * value as `config.invalid_var`, like an invalid HISTORY_* duration, and taken as **on** — the safe
 * side, since a sweep without the archive deletes a trace for good while an archived one can still
 * be erased. On still needs a bound bucket: without one nothing is archived.
 */
import { reportOnce } from "../definitions/duration-vars";

export type ArchiveSetting = "on" | "off";

/** The var's setting; an invalid value is reported (once) and taken as on. */
export function archiveSetting(value: unknown): ArchiveSetting {
  if (value === undefined || value === null) return "off";
  const text = String(value);
  const word = text.trim().toLowerCase();
  if (word === "" || word === "off") return "off";
  if (word === "on") return "on";
  const shown = text.length > 100 ? `${text.slice(0, 100)}…` : text;
  reportOnce("HISTORY_ARCHIVE", text, {
    variable: "HISTORY_ARCHIVE",
    value: shown,
    fallback: "on",
    message:
      `HISTORY_ARCHIVE ${JSON.stringify(shown)} is neither "on" nor "off"; archiving as if "on" (a trace the sweep removes ` +
      `unarchived is gone for good). Set it to "on" or "off" in wrangler.toml [vars]`,
  });
  return "on";
}
