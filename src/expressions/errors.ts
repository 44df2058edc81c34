/** Thrown for any failure of an expression: syntax, evaluation error, or a limit. */
export class ExpressionError extends Error {
  constructor(
    message: string,
    readonly code: string,
    readonly position: number | undefined,
  ) {
    super(message);
    this.name = "ExpressionError";
  }
}
