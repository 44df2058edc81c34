/**
 * A CPU profile of a `wrangler dev` Worker's isolate, taken through its inspector port (the
 * DevTools protocol), for finding where a benchmark's time goes:
 *
 *   const stop = await startProfile(inspectorPort);
 *   … drive load …
 *   const profile = await stop();          // a .cpuprofile object (open it in Chrome DevTools)
 *   console.log(summarizeProfile(profile)); // self time per function, the top ones
 */
import { setTimeout as sleep } from "node:timers/promises";

/** The isolate's DevTools websocket (wrangler's inspector proxy lists it at /json). */
async function debuggerUrl(inspectorPort) {
  for (let i = 0; i < 20; i++) {
    try {
      const targets = await (await fetch(`http://127.0.0.1:${inspectorPort}/json`)).json();
      const url = targets.find((t) => t.webSocketDebuggerUrl)?.webSocketDebuggerUrl;
      if (url) return url;
    } catch {
      // not listening yet
    }
    await sleep(250);
  }
  throw new Error(`no DevTools target on inspector port ${inspectorPort}`);
}

/** Start the isolate's sampling profiler; the returned function stops it and resolves with the profile. */
export async function startProfile(inspectorPort, { intervalUs = 200 } = {}) {
  // wrangler's inspector proxy wants an allowed Origin (undici's WebSocket takes headers as an option).
  const socket = new WebSocket(await debuggerUrl(inspectorPort), { headers: { origin: "http://localhost" } });
  await new Promise((resolve, reject) => {
    socket.addEventListener("open", resolve, { once: true });
    socket.addEventListener("error", () => reject(new Error("inspector websocket failed")), { once: true });
  });
  let id = 0;
  const pending = new Map();
  socket.addEventListener("message", (event) => {
    const message = JSON.parse(String(event.data));
    const waiter = pending.get(message.id);
    if (!waiter) return;
    pending.delete(message.id);
    if (message.error) waiter.reject(new Error(JSON.stringify(message.error)));
    else waiter.resolve(message.result);
  });
  const send = (method, params = {}) =>
    new Promise((resolve, reject) => {
      const n = ++id;
      pending.set(n, { resolve, reject });
      socket.send(JSON.stringify({ id: n, method, params }));
    });
  await send("Profiler.enable");
  await send("Profiler.setSamplingInterval", { interval: intervalUs });
  await send("Profiler.start");
  return async () => {
    const { profile } = await send("Profiler.stop");
    socket.close();
    return profile;
  };
}

/** Self time per function (and per script), the `top` largest, as printable lines. */
export function summarizeProfile(profile, top = 40) {
  const byNode = new Map(profile.nodes.map((n) => [n.id, n]));
  const selfUs = new Map();
  const deltas = profile.timeDeltas ?? [];
  profile.samples.forEach((nodeId, i) => selfUs.set(nodeId, (selfUs.get(nodeId) ?? 0) + (deltas[i + 1] ?? 0)));
  const byFunction = new Map();
  const byScript = new Map();
  let total = 0;
  for (const [nodeId, us] of selfUs) {
    const { callFrame } = byNode.get(nodeId);
    const script = callFrame.url ? callFrame.url.split("/").slice(-1)[0] : "(native)";
    const name = `${callFrame.functionName || "(anonymous)"} ${script}:${callFrame.lineNumber + 1}`;
    byFunction.set(name, (byFunction.get(name) ?? 0) + us);
    byScript.set(script, (byScript.get(script) ?? 0) + us);
    total += us;
  }
  const idle = [...byFunction].filter(([name]) => /^\((idle|program|garbage collector)\)/.test(name)).reduce((n, [, us]) => n + us, 0);
  const lines = [`profile: ${(total / 1000).toFixed(0)} ms sampled, ${((total - idle) / 1000).toFixed(0)} ms not idle`];
  for (const [name, us] of [...byFunction].sort((a, b) => b[1] - a[1]).slice(0, top)) {
    lines.push(`${(us / 1000).toFixed(1).padStart(9)} ms  ${((100 * us) / total).toFixed(1).padStart(5)} %  ${name}`);
  }
  return lines.join("\n");
}
