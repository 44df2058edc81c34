/**
 * Shaping `$idempotencyKey(prefix, …)` to a destination's constraints (its maximum length and
 * alphabet), so a key built for a 40-character ASCII API fits that API.
 *
 * The key is always `prefix + separator + digest`, the digest being the SHA-256 of the canonical
 * parts encoded in the alphabet and cut to what fits:
 *
 * - an alphabet with letters, digits, `-` and `_` (url-safe, printable ASCII): separator `-`,
 *   base64url digest, at most its 43 characters (256 bits);
 * - otherwise one with digits and `a`-`f` (alphanumeric): lowercase hex, at most 64 characters,
 *   and a separator `-` only if the alphabet holds it (alphanumeric does not: the prefix is
 *   followed directly by the digest).
 *
 * The untruncated case IS today's key: `prefix-` plus 43 base64url characters. So a key that
 * already fits (every key under the default 1–255 printable ASCII, Stripe's 255, Adyen's 64 for
 * a prefix up to 20 characters) is byte-for-byte what it always was; only a key that would not
 * fit changes — and it changes deterministically: the cut depends on the prefix length and the
 * constraints of the pinned version, never on the values.
 *
 * The collision bound. Keeping b bits of a uniform digest, the chance that any two of n distinct
 * operations with the same prefix share a key is at most n² / 2^(b+1) (the birthday bound). The
 * shortest digest allowed is MIN_DIGEST_BITS = 96 bits (16 base64url or 24 hex characters):
 * n = 10^6 keys → ≤ 6.3 × 10^-18; n = 10^9 keys → ≤ 6.3 × 10^-12. A 40-character limit with the
 * prefix `charge` keeps 33 base64url characters (198 bits) or 34 hex characters (136 bits). A
 * prefix that leaves less than the minimum is refused (at save time when the prefix is a literal,
 * else when the step runs): a weaker key would be a collision waiting to merge two charges.
 */
import { validateKey, type KeyAlphabet, type KeyConstraints } from "../lib/key-constraints";
import { toBase64Url, toHex } from "../lib/crypto";

/** Fewer digest bits than this and the key is refused (see the bound above). */
export const MIN_DIGEST_BITS = 96;

export interface KeyShape {
  separator: "-" | "";
  encoding: "base64url" | "hex";
  /** How many digest characters the key carries. */
  digestChars: number;
  /** The digest bits those characters carry: the figure the collision bound is computed from. */
  bits: number;
}

const ENCODINGS = {
  // 43 characters carry the 256 bits (the last one only 4 of its 6).
  base64url: { bitsPerChar: 6, fullChars: 43, fullBits: 256, chars: "-_0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz" },
  hex: { bitsPerChar: 4, fullChars: 64, fullBits: 256, chars: "0123456789abcdef" },
} as const;

const allows = (alphabet: KeyAlphabet, text: string): boolean =>
  validateKey(text, { minLength: 0, maxLength: Number.MAX_SAFE_INTEGER, alphabet }).ok;

/**
 * How a key with this prefix is shaped under `constraints`, or why it cannot be (the prefix holds
 * a character the destination refuses, or leaves too little room for a safe digest). Pure: the
 * definitions validation calls it for a literal prefix, the helper for every key it builds.
 */
export function keyShape(prefix: string, constraints: KeyConstraints): { shape: KeyShape } | { error: string } {
  const { alphabet, maxLength } = constraints;
  const encoding = allows(alphabet, ENCODINGS.base64url.chars) ? "base64url" : allows(alphabet, ENCODINGS.hex.chars) ? "hex" : null;
  if (encoding === null) return { error: `the destination's alphabet (${alphabet.name}) cannot carry a base64url or hex digest` };
  const separator = allows(alphabet, "-") ? "-" : "";
  if (!allows(alphabet, prefix)) {
    return { error: `the prefix ${JSON.stringify(prefix)} holds characters the destination refuses (it accepts ${alphabet.name} only)` };
  }
  const { bitsPerChar, fullChars, fullBits } = ENCODINGS[encoding];
  const digestChars = Math.min(fullChars, maxLength - prefix.length - separator.length);
  const minChars = Math.ceil(MIN_DIGEST_BITS / bitsPerChar);
  if (digestChars < minChars) {
    const room = maxLength - minChars - separator.length;
    return {
      error:
        `the prefix ${JSON.stringify(prefix)} is too long for keys of at most ${maxLength} characters: ` +
        `the digest needs at least ${minChars} ${encoding} characters (${MIN_DIGEST_BITS} bits); ` +
        `use a prefix of at most ${Math.max(room, 0)}`,
    };
  }
  const bits = digestChars === fullChars ? fullBits : digestChars * bitsPerChar;
  return { shape: { separator, encoding, digestChars, bits } };
}

/** The key itself: prefix, separator and the digest encoded and cut as `shape` says. */
export function shapedKey(prefix: string, digest: Uint8Array, shape: KeyShape): string {
  const encoded = shape.encoding === "base64url" ? toBase64Url(digest) : toHex(digest);
  return `${prefix}${shape.separator}${encoded.slice(0, shape.digestChars)}`;
}
