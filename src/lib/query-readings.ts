/**
 * What a business value typed into a query string means (`?identity=1001`, `?match=1001`): the text
 * is always read as a string, and when it is JSON of another type, as that value too — `1001` is
 * the string "1001" and the number 1001, `true` the string and the boolean — so a caller need not
 * know how the sender typed it. A quoted JSON string (`"1001"`) means exactly that string: the way
 * to leave the other readings out. A number JSON cannot carry exactly is only the string.
 */
import { findUnsafeNumber } from "./json-numbers";

export function queryReadings(text: string): unknown[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return [text];
  }
  if (typeof parsed === "string") return [parsed];
  if (parsed === null || findUnsafeNumber(parsed)) return [text];
  return [text, parsed];
}
