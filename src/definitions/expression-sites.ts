/**
 * Where expressions may appear in a definition, and what is in them. One list, used by the
 * compile check, the key lint and the secrets rule, so all three agree on what is an expression:
 *
 * - GATEWAY: `url`, every `headers` and `query` value, every string anywhere inside `body`, the
 *   declared destination key's `idempotencyKey.value`; its verify probe's `url`, `headers` and
 *   `query` values and `condition`; its `compensate` (the undo call: docs/steps.md "Compensation"):
 *   `url`, `headers` and `query` values, `body`, `idempotencyKey.value`, marked `compensation` (they
 *   also read `output`, the step's own output);
 * - TRANSFORM: every string anywhere inside `output`;
 * - DELAY: `until`;
 * - WAIT_FOR_EVENT: `match`;
 * - MAP: `items`, `collect`, and its step's sites as above (a GATEWAY's or a TRANSFORM's), each
 *   marked with the MAP's scope (`map`: the item's name) except `items`, which runs before any item;
 * - edges: `when`.
 *
 * Only strings that begin with `=` are expressions. (A literal that must begin with `=` is written
 * as an expression returning it: `"= '=literal'"`.)
 */
import { asArray, asRecord } from "./errors";
import { pointerOf, type PathSegment } from "./pointer";
import { EXPRESSION_PREFIX, isExpression } from "./schema";
import { mapItemName, stepConfigs, type MapScope } from "./step-configs";

export interface ExpressionSite {
  pointer: string;
  /** The JSONata source, without the leading `=`. */
  source: string;
  /** For GATEWAY headers: the header name as written. */
  headerName?: string;
  /** The destination key's declared expression (`idempotencyKey.value`), wherever the key travels. */
  declaredKey?: true;
  /** In a GATEWAY's `compensate`: the expression also sees `output` (the compensated step's output). */
  compensation?: true;
  /** In a MAP's step or `collect`: the expression also sees the item (under `map.itemName`) and `index`. */
  map?: MapScope;
}

export function expressionSites(document: unknown): ExpressionSite[] {
  const sites: ExpressionSite[] = [];
  const root = asRecord(document);
  if (!root) return sites;

  const add = (value: unknown, path: PathSegment[], headerName?: string, scope: { map?: MapScope; compensation?: true } = {}) => {
    if (isExpression(value)) {
      sites.push({
        pointer: pointerOf(...path),
        source: value.slice(EXPRESSION_PREFIX.length),
        ...(headerName ? { headerName } : {}),
        ...scope,
      });
    }
  };
  const walk = (value: unknown, path: PathSegment[], scope: { map?: MapScope; compensation?: true }) => {
    if (Array.isArray(value)) value.forEach((item, i) => walk(item, [...path, i], scope));
    else if (asRecord(value)) for (const [key, item] of Object.entries(value as object)) walk(item, [...path, key], scope);
    else add(value, path, undefined, scope);
  };

  // Every step config: the top-level vertices and each MAP's step (src/definitions/step-configs.ts).
  for (const site of stepConfigs(root)) {
    const { config, base, map } = site;
    const scope = map ? { map } : {};
    if (site.type === "GATEWAY") {
      add(config.url, [...base, "url"], undefined, scope);
      for (const [name, value] of Object.entries(asRecord(config.headers) ?? {})) add(value, [...base, "headers", name], name, scope);
      for (const [name, value] of Object.entries(asRecord(config.query) ?? {})) add(value, [...base, "query", name], undefined, scope);
      if ("body" in config) walk(config.body, [...base, "body"], scope);
      const key = asRecord(config.idempotencyKey)?.value;
      if (isExpression(key)) {
        sites.push({
          pointer: pointerOf(...base, "idempotencyKey", "value"),
          source: key.slice(EXPRESSION_PREFIX.length),
          declaredKey: true,
          ...scope,
        });
      }
      const compensate = asRecord(config.compensate);
      if (compensate) {
        const at = [...base, "compensate"];
        const undo = { ...scope, compensation: true as const };
        add(compensate.url, [...at, "url"], undefined, undo);
        for (const [name, value] of Object.entries(asRecord(compensate.headers) ?? {})) add(value, [...at, "headers", name], name, undo);
        for (const [name, value] of Object.entries(asRecord(compensate.query) ?? {})) add(value, [...at, "query", name], undefined, undo);
        if ("body" in compensate) walk(compensate.body, [...at, "body"], undo);
        const undoVerify = asRecord(compensate.verify);
        if (undoVerify) {
          const v = [...at, "verify"];
          add(undoVerify.url, [...v, "url"], undefined, undo);
          for (const [name, value] of Object.entries(asRecord(undoVerify.headers) ?? {}))
            add(value, [...v, "headers", name], undefined, undo);
          for (const [name, value] of Object.entries(asRecord(undoVerify.query) ?? {})) add(value, [...v, "query", name], undefined, undo);
          add(undoVerify.condition, [...v, "condition"], undefined, undo);
        }
        const undoKey = asRecord(compensate.idempotencyKey)?.value;
        if (isExpression(undoKey)) {
          sites.push({
            pointer: pointerOf(...at, "idempotencyKey", "value"),
            source: undoKey.slice(EXPRESSION_PREFIX.length),
            declaredKey: true,
            ...undo,
          });
        }
      }
      const verify = asRecord(config.verify);
      if (verify) {
        // No headerName: a probe sends no destination key, so the key lint has nothing to say about its headers.
        const at = [...base, "verify"];
        add(verify.url, [...at, "url"], undefined, scope);
        for (const [name, value] of Object.entries(asRecord(verify.headers) ?? {})) add(value, [...at, "headers", name], undefined, scope);
        for (const [name, value] of Object.entries(asRecord(verify.query) ?? {})) add(value, [...at, "query", name], undefined, scope);
        add(verify.condition, [...at, "condition"], undefined, scope);
      }
    } else if (site.type === "TRANSFORM") {
      if ("output" in config) walk(config.output, [...base, "output"], scope);
    } else if (site.type === "DELAY") {
      add(config.until, [...base, "until"]);
    } else if (site.type === "WAIT_FOR_EVENT") {
      add(config.match, [...base, "match"]);
    } else if (site.type === "MAP") {
      // The list is evaluated before any item exists: it sees `payload` and `steps` only. `collect`
      // sees the item, `index` and the item step's output (its step's expressions follow as their own site).
      add(config.items, [...base, "items"]);
      add(config.collect, [...base, "collect"], undefined, { map: { itemName: mapItemName(config), vertexIndex: site.vertexIndex } });
    }
  }
  asArray(root.edges).forEach((raw, j) => add(asRecord(raw)?.when, ["edges", j, "when"]));
  return sites;
}

/** The header name of the original key form (no `idempotencyKey` declaration), compared in any letter case. */
export function isIdempotencyKeyHeader(name: string): boolean {
  return name.toLowerCase() === "idempotency-key";
}

/** A destination key's expression: the declared one (wherever it travels), or the `Idempotency-Key` header. */
export function isKeySite(site: ExpressionSite): boolean {
  return site.declaredKey === true || (site.headerName !== undefined && isIdempotencyKeyHeader(site.headerName));
}
