/**
 * Which connectors of a workspace have limits, as a claim reads them (SPEC section 17,
 * docs/connectors.md "Limits"): a send through a connector not among them skips the permit's ask —
 * a connector without limits costs no round trip. No imports: the claim (./step-claim.ts) reads it,
 * and ./connector-permits.ts sits above the claim's modules.
 */
/** The most limited connectors of a workspace a claim reads by name; past it, every send asks. */
export const MAX_LIMITED_NAMED = 100;

/**
 * A column for a claim's read (src/ledger/step-claim.ts): the workspace's limited connectors, a JSON
 * array of names — or, past `MAX_LIMITED_NAMED`, one name more than that (then every send asks). A
 * send through a connector not in it skips the ask (`askPermit`), so a connector without limits
 * costs no round trip: the claim's batch read the scope rows, in the same transaction as the claim.
 * An index range over `connector_limits`' primary key (the workspace's limited scopes only).
 */
export const limitedConnectorsColumn = (workspace: string) =>
  `(SELECT json_group_array(connector) FROM (SELECT connector FROM connector_limits
      WHERE workspace = ${workspace} ORDER BY connector LIMIT ${MAX_LIMITED_NAMED + 1}))`;

/**
 * True: a send through `connector` must ask for a permit, by a claim's `limitedConnectorsColumn`
 * (`json`): named in it, or the list is unknown (absent, unreadable, or cut at its bound).
 */
export function mustAsk(json: string | null | undefined, connector: string): boolean {
  if (json === null || json === undefined) return true;
  let names: unknown;
  try {
    names = JSON.parse(json);
  } catch {
    return true;
  }
  if (!Array.isArray(names) || names.length > MAX_LIMITED_NAMED) return true;
  return names.includes(connector);
}
