/** The answer of `GET /v1/connectors/{name}/state` (docs/connectors.md "Limits"): the scope's row as the API shows it. */
import { isoTime } from "../lib/iso-time";
import type { ScopeState } from "../ledger/connector-permits";

const PER = { 1000: "s", 60_000: "m", 3_600_000: "h" } as const;

export function presentState(name: string, state: ScopeState | null) {
  return {
    name,
    limited: state !== null,
    concurrency: state?.concurrency ?? null,
    rate: state?.rate
      ? { count: state.rate.count, per: PER[state.rate.periodMs as keyof typeof PER] ?? "s", burst: state.rate.burst }
      : null,
    inFlight: state?.inFlight ?? 0,
    waiting: state?.waiting ?? 0,
    tokens: state?.tokens === null || state?.tokens === undefined ? null : Math.round(state.tokens * 1000) / 1000,
    pausedUntil: isoTime(state?.pausedUntil ?? null),
    pauseReason: state?.pauseReason ?? null,
    heldBack: state?.heldBack ?? 0,
  };
}
