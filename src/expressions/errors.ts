/**
 * Why an expression failed. idemflow's own bounds have names; anything else carries JSONata's own
 * error code (`S0201` syntax, `T0410` argument type, `D3030` …: a letter and four digits, see
 * https://docs.jsonata.org/errors), or the phase when JSONata gave none.
 */
export type ExpressionErrorCode =
  "depth-limit" | "step-limit" | "sequence-limit" | "size-limit" | "compile" | "evaluate" | JsonataErrorCode;

/** JSONata's codes: S (syntax), T (type), D (dynamic), U (undefined). */
export type JsonataErrorCode = `${"S" | "T" | "D" | "U"}${number}`;

export function isJsonataErrorCode(code: unknown): code is JsonataErrorCode {
  return typeof code === "string" && /^[STDU]\d{4}$/.test(code);
}

/** Thrown for any failure of an expression: syntax, evaluation error, or a limit. */
export class ExpressionError extends Error {
  constructor(
    message: string,
    readonly code: ExpressionErrorCode,
    readonly position: number | undefined,
  ) {
    super(message);
    this.name = "ExpressionError";
  }
}
