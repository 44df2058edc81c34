/**
 * A destination key inside a MAP (SPEC section 16) must be one key per item, from the item's
 * business data. Two ways to get it wrong, each refused at save with its pointer:
 *
 * - `map-item-key-ignores-item`: the key does not read the item at all (only `payload`, `steps`,
 *   or nothing): every item of the list sends the same key, and the destination takes the second
 *   item for a repeat of the first and swallows it;
 * - `map-item-key-from-index`: the key reaches the item only through `index`, its position: the
 *   position changes when the list is re-ordered upstream (a line removed, lines sorted), so a
 *   start-over or a later execution on the same order would give another item the key an earlier
 *   one was sent under. Business fields do not move.
 *
 * Judged on the key lint's reading of the compiled expression (src/definitions/key-lint.ts
 * `lintKey`, which knows the item's name): the inline key at `idempotencyKey.value` or the
 * `Idempotency-Key` header, and, for a step through a connector, the key its rule builds from the
 * step's `keyFields` (src/connectors/resolve.ts, pointing at `keyFields`).
 */

export interface ItemReads {
  /** The expression reads the item (its name as a root field), as a whole or any field of it. */
  readsItem: boolean;
  /** The expression reads `index` (a root field). */
  readsIndex: boolean;
}

export const MAP_KEY_CODES = ["map-item-key-ignores-item", "map-item-key-from-index"] as const;

/**
 * Why a key inside a MAP whose item is `itemName` is not one key per item, or null. `subject`
 * names the key in the message ("this key", "the key connector X builds from keyFields").
 */
export function mapItemKeyProblem(
  reads: ItemReads,
  itemName: string,
  subject: string,
): { code: (typeof MAP_KEY_CODES)[number]; message: string } | null {
  if (reads.readsItem) return null;
  const example = `\`= $idempotencyKey('refund', payload.order.id, ${itemName}.sku)\``;
  if (reads.readsIndex) {
    return {
      code: "map-item-key-from-index",
      message:
        `${subject} reaches the item only through \`index\`, its position in the list: the position changes when the list is ` +
        "re-ordered upstream (a line removed, lines sorted), so a start-over or a later execution would send one item's key " +
        `for another item and the destination would swallow it. Build the key from the item's business fields under ` +
        `\`${itemName}\`, e.g. ${example}`,
    };
  }
  return {
    code: "map-item-key-ignores-item",
    message:
      `${subject} does not read the item \`${itemName}\`: every item of the list would send the same key, and the destination ` +
      "would take the second item for a repeat of the first and swallow it. Build the key from the item's business data, " +
      `e.g. ${example}`,
  };
}
