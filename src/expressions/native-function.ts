/**
 * Making a wrapper look, to JSONata, exactly like the native function it stands for.
 *
 * Besides the signature string given to `registerFunction`, JSONata reads two things off a native
 * function's JavaScript object:
 *
 * - its `length` (JSONata's `getFunctionArity`): higher-order functions decide from it how many
 *   arguments to pass (`$map` passes value, index and array to a function of arity 3, the value
 *   alone to one of arity 1), and `$reduce` refuses a function of arity below 2;
 * - its source text (`toString()`), from which partial application takes the parameter names: for
 *   `$substring(?, 0, ?)` JSONata builds `function($str, $start, $length){ _ }` from
 *   `function substring(str, start, length)`, and later looks the arguments up by those names.
 *
 * A wrapper written `(...args) =>` has length 0 and no names, so `$reduce(list, $append)` and
 * every partial application of it break. `declareParameters` gives a wrapper the parameter list
 * of the function it stands for (its length, and the text JSONata parses), without `eval` or
 * `new Function` (both blocked in Workers). The wrapper must accept its arguments positionally.
 */
export function declareParameters<F extends (...args: never[]) => unknown>(wrapper: F, name: string, parameters: string): F {
  Object.defineProperty(wrapper, "length", { value: arityOf(parameters) });
  const source = `function ${name}(${parameters}) { [idemflow wrapper] }`;
  Object.defineProperty(wrapper, "toString", { value: () => source });
  return wrapper;
}

/** As JavaScript counts `Function.length`: the parameters before the first default or rest one. */
export function arityOf(parameters: string): number {
  let arity = 0;
  for (const parameter of parameters.split(",")) {
    const p = parameter.trim();
    if (p === "" || p.includes("=") || p.startsWith("...")) break;
    arity += 1;
  }
  return arity;
}

/** The parameter text of a function's source, exactly as JSONata's partial application reads it. */
export function parameterText(fn: { toString(): string }): string {
  return /\(([^)]*)\)/.exec(fn.toString())?.[1] ?? "";
}
