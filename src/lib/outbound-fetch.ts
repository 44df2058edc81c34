/**
 * The outbound seam: the one `fetch` the engine sends a Gateway step's request (and its verify
 * probe) with — `defaultRuntime` (src/steps/runtime.ts) reads it from the env it is handed, as it
 * reads the clock (./clock.ts).
 *
 * Production never sets it: `outboundFetchOf` is the global `fetch` then. The scenario runner
 * (`npm run test:workflows`, docs/testing-workflows.md) hands the Worker's entry points
 * `withOutboundFetch(env, answer)` so every call a step makes is answered from the scenario,
 * never the network.
 *
 * It travels on the env under a symbol, like the clock: no wrangler binding or var can set it, and
 * the object spreads that build a shard's env copy it.
 */
const OUTBOUND = Symbol("idemflow.outbound-fetch");

type WithOutbound = { readonly [OUTBOUND]?: typeof fetch };

/** `env` with `send` as its outbound fetch (a new object; `env` is unchanged). */
export function withOutboundFetch<E extends object>(env: E, send: typeof fetch): E {
  return { ...env, [OUTBOUND]: send };
}

/** The outbound fetch `env` carries, or the global `fetch` (read at each call). */
export function outboundFetchOf(env: object): typeof fetch {
  return (env as WithOutbound)[OUTBOUND] ?? ((input, init) => fetch(input, init));
}
