/**
 * A played scenario held to its `expect`: each disagreement as `what: expected …, actual …` with
 * the trace excerpt around it — the step's sends (attempt, virtual time, key, answer) and its state
 * in the newest execution.
 *
 * Words (docs/testing-workflows.md): a step's `attempts` are its sends that reached the mocked
 * destination — every one, including those answered 409 in progress, lost or timed out — and not
 * claims, parks or the engine's own attempt counter; `probes` are its verify probes, counted apart;
 * `sent` is `attempts`.
 */
import { evaluate } from "../../src/expressions/evaluate";
import type { Scenario } from "./scenario-schema";
import type { Played } from "./runner";
import type { Send, ScenarioWorld } from "./world";

export interface Resent {
  /** Virtual ms after the trigger. */
  at: number;
  executionId: string;
  deduplicated: boolean;
}

interface TraceStep {
  vertexId: string;
  state: string;
  error: string | null;
  output: unknown;
}
interface Trace {
  executionId: string;
  status: string;
  steps: TraceStep[];
}

export function formatDuration(ms: number): string {
  if (ms === 0) return "0s";
  const parts: string[] = [];
  let rest = ms;
  for (const [unit, size] of [
    ["d", 86_400_000],
    ["h", 3_600_000],
    ["m", 60_000],
    ["s", 1000],
  ] as const) {
    if (rest >= size) {
      parts.push(`${Math.floor(rest / size)}${unit}`);
      rest %= size;
    }
  }
  if (rest > 0) parts.push(`${rest}ms`);
  return parts.join("");
}

const show = (v: unknown) => (v === undefined ? "nothing" : JSON.stringify(v));
const clip = (text: string, max = 160) => (text.length > max ? `${text.slice(0, max)}…` : text);

/** Where `actual` does not contain `expected` (objects: every expected member, recursively; arrays: same length, each element), or null. */
export function subsetMismatch(expected: unknown, actual: unknown, path = ""): string | null {
  if (expected !== null && typeof expected === "object" && !Array.isArray(expected)) {
    if (actual === null || typeof actual !== "object" || Array.isArray(actual))
      return `${path || "/"}: expected an object, actual ${show(actual)}`;
    for (const [k, v] of Object.entries(expected)) {
      const inner = Object.hasOwn(actual, k) ? (actual as Record<string, unknown>)[k] : undefined;
      const m = subsetMismatch(v, inner, `${path}/${k}`);
      if (m) return m;
    }
    return null;
  }
  if (Array.isArray(expected)) {
    if (!Array.isArray(actual) || actual.length !== expected.length)
      return `${path || "/"}: expected ${show(expected)}, actual ${show(actual)}`;
    for (let i = 0; i < expected.length; i++) {
      const m = subsetMismatch(expected[i], actual[i], `${path}/${i}`);
      if (m) return m;
    }
    return null;
  }
  return expected === actual ? null : `${path || "/"}: expected ${show(expected)}, actual ${show(actual)}`;
}

function sendLine(world: ScenarioWorld, s: Send): string {
  const what = s.kind === "probe" ? "probe" : s.kind === "undo" ? "undo attempt" : "attempt";
  const key = s.key === null ? "no key" : `key ${s.key}`;
  const body = s.body === null ? "" : `, body ${clip(JSON.stringify(s.body), 120)}`;
  const item = s.item === null ? "" : ` (item ${s.item})`;
  return `    ${s.step} ${what} ${s.n}${item} at +${formatDuration(s.at - world.t0)}: ${key}${body} → ${s.answer}`;
}

/** The trace excerpt of one step: its sends and probes, then its state (and error) in the newest execution. */
function excerpt(world: ScenarioWorld, trace: Trace | undefined, step: string): string[] {
  const lines = world.sends.filter((s) => s.step === step).map((s) => sendLine(world, s));
  const row = trace?.steps.find((s) => s.vertexId === step);
  lines.push(
    row
      ? `    ${step}: ${row.state}${row.error ? ` — ${clip(row.error, 240)}` : ""}`
      : `    ${step}: NOT_REACHED (no row in execution ${trace?.executionId ?? "?"})`,
  );
  return lines;
}

export async function checkExpectations(scenario: Scenario, played: Played): Promise<string[]> {
  const { world, resent } = played;
  const traces = played.traces as Trace[];
  const trace = traces[traces.length - 1];
  const expect = scenario.expect;
  const out: string[] = [];
  const fail = (what: string, lines: string[] = []) => out.push([what, ...lines].join("\n"));

  if (world.unscripted) {
    const last = world.sends[world.sends.length - 1]!;
    const step = last.step;
    const what = last.kind === "undo" ? `${step}'s undo calls (\`compensate\`)` : step;
    fail(
      `${world.unscripted}: the scenario scripts ${scriptedCount(scenario, step, last.kind)} answer(s) for ${what}`,
      excerpt(world, trace, step),
    );
    return out;
  }
  if (expect.status !== undefined && trace?.status !== expect.status) {
    fail(
      `status: expected ${expect.status}, actual ${trace?.status}`,
      (trace?.steps ?? []).filter((s) => s.state !== "COMPLETED" || s.error).flatMap((s) => excerpt(world, trace, s.vertexId)),
    );
  }
  if (expect.executions !== undefined && traces.length !== expect.executions)
    fail(
      `executions: expected ${expect.executions}, actual ${traces.length} ` +
        `(${traces.map((t) => `${t.executionId.slice(0, 12)}… ${t.status}`).join(", ")})`,
    );
  if (expect.deduplicated) {
    expect.deduplicated.forEach((want, i) => {
      const r = resent[i];
      if (r && r.deduplicated !== want)
        fail(`deduplicated[${i}] (the resend at +${formatDuration(r.at)}): expected ${want}, actual ${r.deduplicated}`, [
          `    it answered execution ${r.executionId}${r.executionId === traces[0]?.executionId ? " (the trigger's)" : " (a new one)"}`,
        ]);
    });
  }
  for (const [step, want] of Object.entries(expect.sent ?? {})) {
    const n = world.sendsOf(step).length;
    if (n !== want) fail(`sent.${step}: expected ${want}, actual ${n}`, excerpt(world, trace, step));
  }
  for (const [step, e] of Object.entries(expect.steps ?? {})) {
    const row = trace?.steps.find((s) => s.vertexId === step);
    const sends = world.sendsOf(step);
    const at = `steps.${step}`;
    if (e.state !== undefined && (row?.state ?? "NOT_REACHED") !== e.state)
      fail(`${at}.state: expected ${e.state}, actual ${row?.state ?? "NOT_REACHED"}`, excerpt(world, trace, step));
    if (e.attempts !== undefined && sends.length !== e.attempts)
      fail(`${at}.attempts: expected ${e.attempts}, actual ${sends.length}`, excerpt(world, trace, step));
    if (e.probes !== undefined && world.sendsOf(step, "probe").length !== e.probes)
      fail(`${at}.probes: expected ${e.probes}, actual ${world.sendsOf(step, "probe").length}`, excerpt(world, trace, step));
    if (e.key !== undefined) {
      const wrong = sends.find((s) => s.key !== e.key);
      if (sends.length === 0) fail(`${at}.key: expected ${e.key}, actual no send of ${step}`, excerpt(world, trace, step));
      else if (wrong)
        fail(`${at}.key: expected ${e.key}, actual ${wrong.key ?? "no key"} (attempt ${wrong.n})`, excerpt(world, trace, step));
    }
    if (e.sameKey) {
      // A MAP's items have a key each: one and the same key over every send of an item.
      const firstOf = new Map<number | null, Send>();
      for (const s of sends) if (!firstOf.has(s.item)) firstOf.set(s.item, s);
      const first = sends[0];
      const wrong = sends.find((s) => s.key === null || s.key !== firstOf.get(s.item)?.key);
      if (!first) fail(`${at}.sameKey: expected one key over every send, actual no send of ${step}`, excerpt(world, trace, step));
      else if (wrong)
        fail(
          `${at}.sameKey: expected one key over every send, ` +
            `actual attempt ${wrong.n} sent ${wrong.key ?? "no key"} where attempt ${firstOf.get(wrong.item)!.n} sent ` +
            `${firstOf.get(wrong.item)!.key ?? "no key"}`,
          excerpt(world, trace, step),
        );
    }
    if (e.request !== undefined) {
      if (sends.length === 0) fail(`${at}.request: expected a send of ${step}, actual none`, excerpt(world, trace, step));
      for (const s of sends) {
        const m = subsetMismatch(e.request, s.body);
        if (m) {
          fail(`${at}.request (attempt ${s.n}'s body) ${m}`, excerpt(world, trace, step));
          break;
        }
      }
    }
    if (e.output !== undefined) {
      const m = subsetMismatch(e.output, row?.output);
      if (m) fail(`${at}.output ${m}`, excerpt(world, trace, step));
    }
    if (e.compensate !== undefined) {
      const undos = world.sendsOf(step, "undo");
      const u = e.compensate;
      const where = `${at}.compensate`;
      if (u.attempts !== undefined && undos.length !== u.attempts)
        fail(`${where}.attempts: expected ${u.attempts}, actual ${undos.length}`, excerpt(world, trace, step));
      if (u.key !== undefined) {
        const wrong = undos.find((s) => s.key !== u.key);
        if (undos.length === 0) fail(`${where}.key: expected ${u.key}, actual no undo call of ${step}`, excerpt(world, trace, step));
        else if (wrong)
          fail(`${where}.key: expected ${u.key}, actual ${wrong.key ?? "no key"} (undo attempt ${wrong.n})`, excerpt(world, trace, step));
      }
      if (u.sameKey) {
        const first = undos[0];
        const wrong = undos.find((s) => s.key === null || s.key !== first?.key);
        if (!first)
          fail(`${where}.sameKey: expected one key over every undo call, actual no undo call of ${step}`, excerpt(world, trace, step));
        else if (wrong)
          fail(
            `${where}.sameKey: expected one key over every undo call, actual undo attempt ${wrong.n} sent ${wrong.key ?? "no key"} ` +
              `where undo attempt ${first.n} sent ${first.key ?? "no key"}`,
            excerpt(world, trace, step),
          );
      }
      if (u.request !== undefined) {
        if (undos.length === 0) fail(`${where}.request: expected an undo call of ${step}, actual none`, excerpt(world, trace, step));
        for (const s of undos) {
          const m = subsetMismatch(u.request, s.body);
          if (m) {
            fail(`${where}.request (undo attempt ${s.n}'s body) ${m}`, excerpt(world, trace, step));
            break;
          }
        }
      }
    }
    if (e.error !== undefined && !(row?.error ?? "").includes(e.error))
      fail(
        `${at}.error: expected a text containing ${JSON.stringify(e.error)}, actual ${show(row?.error ?? null)}`,
        excerpt(world, trace, step),
      );
  }
  const context = {
    trace,
    executions: traces,
    sends: world.sends.map((s) => ({ ...s, at: new Date(s.at).toISOString() })),
    resends: resent,
  };
  for (const [i, source] of (expect.assert ?? []).entries()) {
    let value: unknown;
    try {
      value = await evaluate(source.slice(1), context);
    } catch (error) {
      fail(`assert[${i}] ${source}: does not evaluate: ${(error as Error).message}`);
      continue;
    }
    if (value !== true) fail(`assert[${i}] ${source}: expected true, actual ${show(value)}`);
  }
  return out;
}

function scriptedCount(scenario: Scenario, step: string, kind: Send["kind"]): number {
  const d = scenario.destinations?.[step];
  if (d === undefined) return 0;
  if (kind === "undo") return Array.isArray(d) ? 0 : (d.compensate?.length ?? 0);
  if (kind === "probe") return Array.isArray(d) ? 0 : (d.probes?.length ?? 0);
  return Array.isArray(d) ? d.length : d.answers.length;
}
