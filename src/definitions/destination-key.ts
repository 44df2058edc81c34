/**
 * A Gateway step's destination key, resolved: the one description every part of idemflow reads
 * (the Gateway runner places and checks it, the validation and the key lint inspect it, the
 * retention guard times it, the trace shows it).
 *
 * Two ways to declare it:
 * - `config.idempotencyKey` — the expression, where it travels (a header of any name, or a JSON
 *   body field), the destination's constraints and retention, optionally from a profile
 *   (src/definitions/key-profiles.ts) with any field overridden;
 * - the original form, an `Idempotency-Key` header whose value is an expression: 1–255
 *   printable ASCII, retention unknown (no retention guard).
 */
import { DEFAULT_KEY_CONSTRAINTS, type KeyConstraints } from "../lib/key-constraints";
import { KEY_ALPHABETS, KEY_PROFILES, type KeyLocation, type KeyProfileId } from "./key-profiles";
import { durationMs, type GatewayConfig } from "./schema";

export const DEFAULT_KEY_HEADER = "Idempotency-Key";

export interface DestinationKey {
  /** The `=` expression that computes the key. */
  expression: string;
  location: KeyLocation;
  constraints: KeyConstraints;
  /** How long the destination remembers a key, at least; null when not declared (not guarded). */
  retentionMs: number | null;
  profile: KeyProfileId | null;
  /** `declaration`: `config.idempotencyKey`; `header`: the original `Idempotency-Key` header form. */
  declaredBy: "declaration" | "header";
}

/** Why a declaration does not resolve: the config member to fix (a path below `config`), a code and what to do. */
export interface KeyDeclarationProblem {
  path: Array<string | number>;
  code: string;
  message: string;
}

/**
 * How much earlier than its retention's end the retention guard stops sending a key: a tenth of
 * the retention, at most a minute. It covers idemflow's and the destination's clocks disagreeing
 * and the request's time in flight, so a key is never sent in the last moments its destination
 * might still remember it.
 */
export function retentionMarginMs(retentionMs: number): number {
  return Math.min(60_000, Math.floor(retentionMs / 10));
}

export function isDefaultKeyHeader(name: string): boolean {
  return name.toLowerCase() === DEFAULT_KEY_HEADER.toLowerCase();
}

/**
 * What the step declares, or why the declaration cannot be resolved (a fact its profile leaves
 * to the step, a header and a body field at once, the key declared twice). Validation reports
 * the problems at save time, so a saved version always resolves.
 */
export function resolveDestinationKey(config: GatewayConfig): { key: DestinationKey | null } | { problems: KeyDeclarationProblem[] } {
  const declared = config.idempotencyKey;
  const headerForm = Object.entries(config.headers ?? {}).find(([name]) => isDefaultKeyHeader(name));
  if (!declared) {
    if (!headerForm) return { key: null };
    return {
      key: {
        expression: headerForm[1],
        location: { header: headerForm[0] },
        constraints: DEFAULT_KEY_CONSTRAINTS,
        retentionMs: null,
        profile: null,
        declaredBy: "header",
      },
    };
  }
  const profile = declared.profile ? KEY_PROFILES[declared.profile] : null;
  const problems: KeyDeclarationProblem[] = [];
  const problem = (path: Array<string | number>, code: string, message: string) => problems.push({ path, code, message });
  if (declared.header !== undefined && declared.bodyField !== undefined) {
    problem(["idempotencyKey", "bodyField"], "key-location-twice", "idempotencyKey: set either `header` or `bodyField`, not both");
  }
  const location: KeyLocation =
    declared.bodyField !== undefined
      ? { bodyField: declared.bodyField }
      : declared.header !== undefined
        ? { header: declared.header }
        : (profile?.location ?? { header: DEFAULT_KEY_HEADER });
  const keyHeader = "header" in location ? location.header.toLowerCase() : null;
  const clash = keyHeader === null ? undefined : Object.keys(config.headers ?? {}).find((name) => name.toLowerCase() === keyHeader);
  if (clash !== undefined) {
    problem(
      ["headers", clash],
      "key-header-twice",
      `idempotencyKey: the key travels in the ${clash} header; remove that header from \`headers\``,
    );
  } else if (headerForm) {
    problem(
      ["headers", headerForm[0]],
      "key-declared-twice",
      "idempotencyKey: the key is declared twice; remove the Idempotency-Key header from `headers`",
    );
  }
  const maxLength = declared.maxLength ?? profile?.maxLength ?? DEFAULT_KEY_CONSTRAINTS.maxLength;
  if (maxLength === "required") {
    problem(
      ["idempotencyKey", "maxLength"],
      "key-fact-required",
      `idempotencyKey: the ${profile?.title} profile does not know the destination's longest key; set \`maxLength\` from its API reference`,
    );
  }
  const retention = declared.retention !== undefined ? durationMs(declared.retention) : (profile?.retentionMs ?? null);
  if (retention === "required") {
    problem(
      ["idempotencyKey", "retention"],
      "key-fact-required",
      `idempotencyKey: the ${profile?.title} profile does not know how long the destination remembers a key; ` +
        "set `retention` from its API reference",
    );
  }
  if (problems.length > 0) return { problems };
  return {
    key: {
      expression: declared.value,
      location,
      constraints: {
        minLength: 1,
        maxLength: maxLength as number,
        alphabet: KEY_ALPHABETS[declared.alphabet ?? profile?.alphabet ?? "printable-ascii"],
      },
      retentionMs: retention as number | null,
      profile: declared.profile ?? null,
      declaredBy: "declaration",
    },
  };
}

/** The resolved key of a saved (validated) step; throws if the declaration does not resolve. */
export function destinationKeyOf(config: GatewayConfig): DestinationKey | null {
  const resolved = resolveDestinationKey(config);
  if ("problems" in resolved) {
    throw new Error(`the destination key does not resolve: ${resolved.problems.map((p) => p.message).join("; ")}`);
  }
  return resolved.key;
}

/**
 * The retention guard's destination of a step's key sends (docs/connectors.md): the connector a
 * step went through (`connector:<name>`) — so a connector whose base URL changes does not blind the
 * guard to earlier sends — else the URL's origin.
 */
export function keySendDestination(config: Pick<GatewayConfig, "connector">, url: URL): string {
  const connector = config.connector;
  return connector !== undefined && typeof connector !== "string" ? `connector:${connector.name}` : url.origin;
}
