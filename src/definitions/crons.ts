/**
 * The deployment's cron strings, for the `schedule` rule. Workers do not expose the configured Cron
 * Triggers to code, so they come from an optional `CRONS` var (comma- or newline-separated) that
 * mirrors wrangler.toml [triggers] crons. Without it, schedules are checked for shape only.
 */
export function configuredCrons(env: object): string[] | undefined {
  const raw = (env as { CRONS?: unknown }).CRONS;
  if (typeof raw !== "string") return undefined;
  return raw
    .split(/[,\n]/)
    .map((c) => c.trim())
    .filter((c) => c.length > 0);
}

/** The `crons = [ … ]` of wrangler.toml's [triggers] table (for the offline CLI). */
export function cronsFromWranglerToml(toml: string): string[] | undefined {
  const section = /^\[triggers\]\s*$([\s\S]*?)(?=^\[|(?![\s\S]))/m.exec(toml);
  const list = section && /^\s*crons\s*=\s*\[([\s\S]*?)\]/m.exec(section[1]!);
  if (!list) return undefined;
  return [...list[1]!.matchAll(/"([^"]*)"|'([^']*)'/g)].map((m) => m[1] ?? m[2]!);
}
