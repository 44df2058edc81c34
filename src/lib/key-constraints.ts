/**
 * The one rule for what an idempotency key may be: a length range and an alphabet.
 *
 * Shared by idemflow's own Idempotency-Key middleware (src/http/idempotency/key.ts) and the
 * Gateway step's destination key (src/steps/gateway/key.ts), so the key idemflow accepts and the
 * key it sends cannot drift apart. The default is 1–255 printable ASCII; a destination with other
 * constraints passes its own.
 *
 * It knows nothing of headers: which header carries the key, how a value is unquoted first and
 * what the error says belong to the caller (a 400 problem for the API, a failed step for a
 * Gateway), so a problem comes back as data, never as a sentence or a throw.
 */

/** Code points `first` through `last`, both included. */
export type CodePointRange = readonly [first: number, last: number];

export interface KeyAlphabet {
  /** In words, for callers' messages ("printable ASCII"). */
  readonly name: string;
  readonly ranges: readonly CodePointRange[];
}

export interface KeyConstraints {
  /**
   * Lengths count UTF-16 code units (`String.length`), as both callers always have; for an ASCII
   * alphabet that is the number of characters.
   */
  readonly minLength: number;
  readonly maxLength: number;
  readonly alphabet: KeyAlphabet;
}

/** 0x20–0x7E: what an HTTP header carries unchanged everywhere (no controls, nothing beyond ASCII). */
export const PRINTABLE_ASCII: KeyAlphabet = Object.freeze({ name: "printable ASCII", ranges: Object.freeze([[0x20, 0x7e] as const]) });

export const DEFAULT_KEY_CONSTRAINTS: KeyConstraints = Object.freeze({ minLength: 1, maxLength: 255, alphabet: PRINTABLE_ASCII });

export type KeyLengthProblem =
  | { reason: "empty" }
  /** Not empty, but under `minLength` (never with the default constraints). */
  | { reason: "too_short"; length: number }
  | { reason: "too_long"; length: number };

/** The first character outside the alphabet: its UTF-16 index and code point. */
export interface KeyCharacterProblem {
  reason: "bad_character";
  position: number;
  codePoint: number;
}

export type KeyProblem = KeyLengthProblem | KeyCharacterProblem;

/**
 * On failure, every check that failed, length first: at most one length problem and one character
 * problem. Both checks always run because the callers report a key that breaks both differently
 * (the middleware names the characters, the Gateway step the length), and each keeps its order.
 */
export type KeyCheck = { ok: true } | { ok: false; problems: readonly [KeyProblem, ...KeyProblem[]] };

export function validateKey(value: string, constraints: KeyConstraints): KeyCheck {
  const problems: KeyProblem[] = [];
  const length = lengthProblem(value.length, constraints);
  if (length) problems.push(length);
  const character = characterProblem(value, constraints.alphabet);
  if (character) problems.push(character);
  const [first, ...rest] = problems;
  return first === undefined ? { ok: true } : { ok: false, problems: [first, ...rest] };
}

function lengthProblem(length: number, { minLength, maxLength }: KeyConstraints): KeyLengthProblem | null {
  if (length < minLength) return length === 0 ? { reason: "empty" } : { reason: "too_short", length };
  if (length > maxLength) return { reason: "too_long", length };
  return null;
}

function characterProblem(value: string, alphabet: KeyAlphabet): KeyCharacterProblem | null {
  for (let position = 0; position < value.length;) {
    // By code point, so an alphabet beyond the BMP sees a surrogate pair as one character.
    const codePoint = value.codePointAt(position)!;
    if (!alphabet.ranges.some(([first, last]) => codePoint >= first && codePoint <= last)) {
      return { reason: "bad_character", position, codePoint };
    }
    position += codePoint > 0xffff ? 2 : 1;
  }
  return null;
}
