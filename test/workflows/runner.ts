/**
 * The scenario runner (SPEC section 19, docs/testing-workflows.md): a scenario file checked — its
 * JSON, the schema (./scenario-schema.ts), then against the workflow as the engine saves it — and
 * each scenario played through the real engine (./world.ts) and held to its `expect` (./expect.ts).
 *
 * A file that does not check is invalid: every problem with its JSON pointer, and none of its
 * scenarios runs (`npm run test:workflows` exits 2). A scenario that runs and disagrees fails
 * with what disagrees and the trace excerpt around it (exit 1).
 */
import { env } from "cloudflare:test";
import type { ZodError } from "zod";
import { getWorkflow } from "../../src/definitions/store";
import type { WorkflowDefinition } from "../../src/definitions/schema";
import { compile } from "../../src/expressions/evaluate";
import { cronMatcher } from "../../src/ingress/tick";
import type { WorkflowFiles } from "./bundle.mjs";
import { checkExpectations, formatDuration, type Resent } from "./expect";
import { ScenarioFile, type Scenario } from "./scenario-schema";
import { gatewayOf, RunnerError, ScenarioWorld, type Scripted } from "./world";

export interface Problem {
  pointer: string;
  message: string;
}

/** A file checked: its scenarios ready to play, or its problems. */
export type Checked =
  | { ok: true; file: string; parsed: ScenarioFile; workflowText: string; definition: WorkflowDefinition }
  | { ok: false; file: string; problems: Problem[] };

const DURATION = /^(\d+)(ms|s|m|h|d)$/;
const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

export function durationMs(text: string | undefined, fallback = 0): number {
  const m = text === undefined ? null : DURATION.exec(text);
  return m ? Number(m[1]) * UNIT_MS[m[2]!]! : fallback;
}

const pointerOf = (path: ReadonlyArray<PropertyKey>) =>
  path.map((p) => `/${String(p).replaceAll("~", "~0").replaceAll("/", "~1")}`).join("");

/** The pointer of a JSON parse error's position: the text's line and column (JSON has no pointer yet). */
function parseProblem(text: string, error: unknown): Problem {
  const message = error instanceof Error ? error.message : String(error);
  return { pointer: "", message: `not valid JSON: ${message}` };
}

function zodProblems(error: ZodError): Problem[] {
  const out: Problem[] = [];
  for (const issue of error.issues) {
    if (issue.code === "unrecognized_keys") {
      for (const key of issue.keys) out.push({ pointer: pointerOf([...issue.path, key]), message: `unknown member "${key}"` });
    } else if (issue.code === "invalid_union") {
      // The destinations' two forms: report the problems of the form the value has (an array: the
      // list; else the object) — the branch that did not fail at the value itself.
      const first =
        issue.errors.find((e) => !e.some((inner) => inner.path.length === 0 && inner.code === "invalid_type")) ?? issue.errors[0] ?? [];
      if (first.length === 0) out.push({ pointer: pointerOf(issue.path), message: issue.message });
      for (const inner of first) out.push({ pointer: pointerOf([...issue.path, ...inner.path]), message: inner.message });
    } else out.push({ pointer: pointerOf(issue.path), message: issue.message });
  }
  return out;
}

/** The schema's part of checking a file: synchronous, so the test file can name each scenario. */
export function parseScenarioFile(file: string, text: string): { parsed: ScenarioFile } | { problems: Problem[] } {
  if (text.startsWith("\u0000")) return { problems: [{ pointer: "", message: text.slice(1) }] };
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    return { problems: [parseProblem(text, error)] };
  }
  const result = ScenarioFile.safeParse(json);
  if (!result.success) return { problems: zodProblems(result.error) };
  return { parsed: result.data };
}

/** The workflow file whose `id` is `id`. */
function workflowText(files: WorkflowFiles, id: string): string | undefined {
  for (const { text } of files.workflows) {
    try {
      if ((JSON.parse(text) as { id?: unknown }).id === id) return text;
    } catch {
      // a malformed workflow file is `npm run validate`'s to report
    }
  }
  return undefined;
}

/** The connector names a workflow's steps go through (a MAP's step too). */
function connectorsOf(workflow: unknown): string[] {
  const names = new Set<string>();
  const walk = (config: unknown) => {
    if (config === null || typeof config !== "object") return;
    const c = config as { connector?: unknown; step?: { config?: unknown } };
    if (typeof c.connector === "string") names.add(c.connector);
    walk(c.step?.config);
  };
  for (const v of (workflow as { vertices?: Array<{ config?: unknown }> }).vertices ?? []) walk(v.config);
  return [...names];
}

/** Saves the workflow (and the connectors and fake secrets it needs) in the world's workspace through the routes. */
async function saveWorld(world: ScenarioWorld, files: WorkflowFiles, text: string, secrets: Record<string, string> = {}): Promise<void> {
  const workflow = JSON.parse(text) as { id: string };
  const connectors = connectorsOf(workflow).map((name) =>
    files.connectors.find((c) => (JSON.parse(c.text) as { name?: unknown }).name === name),
  );
  const named = new Set<string>();
  for (const t of [text, ...connectors.map((c) => c?.text ?? "")])
    for (const m of t.matchAll(/\{\{\s*secrets\.([A-Za-z0-9_]+)\s*\}\}/g)) named.add(m[1]!);
  const values = new Map<string, string>([...named].map((n) => [n, `test-${n}`]));
  for (const [name, value] of Object.entries(secrets)) values.set(name, value);
  for (const [name, value] of values) await world.must("PUT", `/v1/secrets/${encodeURIComponent(name)}`, { value });
  for (const connector of connectors)
    if (connector)
      await world.must(
        "PUT",
        `/v1/connectors/${encodeURIComponent((JSON.parse(connector.text) as { name: string }).name)}`,
        JSON.parse(connector.text),
      );
  await world.must("PUT", `/v1/workflows/${encodeURIComponent(workflow.id)}`, workflow);
}

/** The rest of checking a file: its workflow exists and saves, and every step it names is one of that workflow's, of the right type. */
export async function checkScenarioFile(files: WorkflowFiles, file: string, text: string): Promise<Checked> {
  const first = parseScenarioFile(file, text);
  if ("problems" in first) return { ok: false, file, problems: first.problems };
  const parsed = first.parsed;
  const wfText = workflowText(files, parsed.workflow);
  if (wfText === undefined) {
    const ids = files.workflows.map((w) => {
      try {
        return String((JSON.parse(w.text) as { id?: unknown }).id);
      } catch {
        return w.file;
      }
    });
    return {
      ok: false,
      file,
      problems: [{ pointer: "/workflow", message: `no workflow "${parsed.workflow}" in workflows/ (there are: ${ids.join(", ")})` }],
    };
  }
  const world = new ScenarioWorld({ id: parsed.workflow, vertices: [], edges: [] } as unknown as WorkflowDefinition, new Map());
  try {
    await saveWorld(world, files, wfText);
  } catch (error) {
    return {
      ok: false,
      file,
      problems: [{ pointer: "/workflow", message: `workflow "${parsed.workflow}" does not save: ${(error as Error).message}` }],
    };
  } finally {
    world.close();
  }
  const stored = await getWorkflow(env.DB, world.workspace, parsed.workflow);
  const definition = stored!.definition;
  const problems = checkAgainst(parsed, definition);
  return problems.length > 0 ? { ok: false, file, problems } : { ok: true, file, parsed, workflowText: wfText, definition };
}

/** What the schema cannot state: the names a scenario uses, against the workflow as saved (connector steps resolved). */
function checkAgainst(parsed: ScenarioFile, definition: WorkflowDefinition): Problem[] {
  const problems: Problem[] = [];
  const types = new Map(definition.vertices.map((v) => [v.id, v.type]));
  const calls = (id: string) => gatewayOf(definition, id) !== undefined;
  const verifies = new Set(definition.vertices.filter((v) => gatewayOf(definition, v.id)?.config.verify).map((v) => v.id));
  // Only a GATEWAY step declares `compensate` (a MAP's items are not compensated: docs/steps.md "Compensation").
  const compensates = new Set(
    definition.vertices.filter((v) => v.type === "GATEWAY" && gatewayOf(definition, v.id)?.config.compensate).map((v) => v.id),
  );
  const noUndo = (id: string) => `step "${id}" declares no \`compensate\`: it makes no undo calls`;
  const entry = definition.vertices.find((v) => v.type === "ENTRY_POINT");
  const schedule = (entry?.config as { schedule?: string } | undefined)?.schedule;
  const list = [...types.keys()].join(", ");
  const step = (pointer: string, id: string, gateway: boolean) => {
    const type = types.get(id);
    if (type === undefined) problems.push({ pointer, message: `no step "${id}" in workflow ${definition.id} (its steps: ${list})` });
    else if (gateway && !calls(id))
      problems.push({
        pointer,
        message: `step "${id}" is a ${type}, not a GATEWAY: only a Gateway step (or a MAP over one) calls a destination`,
      });
  };
  parsed.scenarios.forEach((s, i) => {
    const at = `/scenarios/${i}`;
    for (const [id, d] of Object.entries(s.destinations ?? {})) {
      step(`${at}/destinations/${id}`, id, true);
      if (!Array.isArray(d) && d.probes && calls(id) && !verifies.has(id))
        problems.push({ pointer: `${at}/destinations/${id}/probes`, message: `step "${id}" declares no \`verify\`: it sends no probes` });
      if (!Array.isArray(d) && d.compensate && calls(id) && !compensates.has(id))
        problems.push({ pointer: `${at}/destinations/${id}/compensate`, message: noUndo(id) });
    }
    for (const id of Object.keys(s.expect.steps ?? {})) step(`${at}/expect/steps/${id}`, id, false);
    for (const [id, e] of Object.entries(s.expect.steps ?? {})) {
      if (e.compensate !== undefined && types.has(id) && !compensates.has(id))
        problems.push({ pointer: `${at}/expect/steps/${id}/compensate`, message: noUndo(id) });
      for (const m of ["attempts", "probes", "key", "sameKey", "request"] as const)
        if (e[m] !== undefined && types.has(id) && !calls(id))
          problems.push({
            pointer: `${at}/expect/steps/${id}/${m}`,
            message: `step "${id}" is a ${types.get(id)}: \`${m}\` is for Gateway steps`,
          });
    }
    for (const id of Object.keys(s.expect.sent ?? {})) step(`${at}/expect/sent/${id}`, id, true);
    (s.actions ?? []).forEach((a, j) => {
      if (a.step !== undefined) step(`${at}/actions/${j}/step`, a.step, false);
    });
    for (const [j, h] of [s.trigger.headers, ...(s.resend ?? []).map((r) => r.headers)].entries()) {
      const name = Object.keys(h ?? {}).find((n) => n.toLowerCase() === "prefer");
      if (name !== undefined)
        problems.push({
          pointer: `${at}/${j === 0 ? "trigger" : `resend/${j - 1}`}/headers/${name}`,
          message: "`Prefer: wait` waits in real time while the runner holds the queue (nothing would run): leave it out",
        });
    }
    if (s.trigger.schedule && !schedule)
      problems.push({ pointer: `${at}/trigger/schedule`, message: `workflow ${definition.id}'s entry point has no \`schedule\`` });
    else if (s.trigger.schedule && !cronMatcher(schedule!))
      problems.push({ pointer: `${at}/trigger/schedule`, message: `the runner cannot find the next tick of "${schedule}"` });
    if (s.trigger.schedule && s.resend?.length) problems.push({ pointer: `${at}/resend`, message: "a schedule tick is not re-sent" });
    const resends = s.resend?.length ?? 0;
    if (s.expect.deduplicated && s.expect.deduplicated.length !== resends)
      problems.push({
        pointer: `${at}/expect/deduplicated`,
        message: `${s.expect.deduplicated.length} answers expected for ${resends} resend${resends === 1 ? "" : "s"}: one per resend`,
      });
    (s.expect.assert ?? []).forEach((source, j) => {
      try {
        compile(source.slice(1));
      } catch (error) {
        problems.push({ pointer: `${at}/expect/assert/${j}`, message: `does not compile: ${(error as Error).message}` });
      }
    });
  });
  return problems;
}

/** The next minute after `from` that `cron` fires on (within a year). */
function nextTick(cron: string, from: number): number {
  const matches = cronMatcher(cron)!;
  let minute = Math.floor(from / 60_000) * 60_000 + 60_000;
  for (let i = 0; i < 366 * 1440; i++, minute += 60_000) {
    const d = new Date(minute);
    if (matches([d.getUTCMinutes(), d.getUTCHours(), d.getUTCDate(), d.getUTCMonth() + 1, d.getUTCDay()])) return minute;
  }
  throw new RunnerError(`no tick of "${cron}" within a year`);
}

type TimelineItem =
  | { at: number; order: number; kind: "event"; event: NonNullable<Scenario["events"]>[number] }
  | { at: number; order: number; kind: "action"; action: NonNullable<Scenario["actions"]>[number] }
  | { at: number; order: number; kind: "resend"; resend: NonNullable<Scenario["resend"]>[number] };

export interface Played {
  world: ScenarioWorld;
  resent: Resent[];
  traces: unknown[];
}

/** Plays one scenario; its result, or the reason the run stopped (a RunnerError). */
export async function playScenario(files: WorkflowFiles, checked: Extract<Checked, { ok: true }>, scenario: Scenario): Promise<Played> {
  const scripts = new Map<string, Scripted>();
  for (const [id, d] of Object.entries(scenario.destinations ?? {})) {
    scripts.set(
      id,
      Array.isArray(d)
        ? { answers: d, probes: [], compensate: [] }
        : { answers: d.answers, probes: d.probes ?? [], compensate: d.compensate ?? [] },
    );
  }
  const world = new ScenarioWorld(checked.definition, scripts);
  const resent: Resent[] = [];
  try {
    await saveWorld(world, files, checked.workflowText, scenario.secrets);
    const id = checked.parsed.workflow;
    const trigger = scenario.trigger;
    const fire = async (payload: unknown, headers: Record<string, string> | undefined, client: string | undefined) => {
      const query = client === undefined ? "" : `?clientIdempotencyId=${encodeURIComponent(client)}`;
      return (await world.must("POST", `/v1/workflows/${encodeURIComponent(id)}/trigger${query}`, payload ?? {}, headers)) as {
        executionId: string;
        deduplicated: boolean;
      };
    };
    if (trigger.schedule) {
      const entry = checked.definition.vertices.find((v) => v.type === "ENTRY_POINT")!;
      const cron = (entry.config as { schedule: string }).schedule;
      world.t = nextTick(cron, world.t);
      await world.cron(cron);
      const { results } = await env.DB.prepare("SELECT id FROM executions WHERE workspace = ?1 ORDER BY created_at, id")
        .bind(world.workspace)
        .all<{ id: string }>();
      if (results.length === 0) throw new RunnerError(`the tick of "${cron}" at ${new Date(world.t).toISOString()} started no execution`);
      for (const r of results) world.adopt(r.id);
    } else {
      world.adopt((await fire(trigger.payload, trigger.headers, trigger.clientIdempotencyId)).executionId);
    }
    const start = world.t;
    const timeline: TimelineItem[] = [
      ...(scenario.events ?? []).map((event, i) => ({ at: start + durationMs(event.at), order: i, kind: "event" as const, event })),
      ...(scenario.actions ?? []).map((action, i) => ({
        at: start + durationMs(action.at),
        order: 1000 + i,
        kind: "action" as const,
        action,
      })),
      ...(scenario.resend ?? []).map((resend, i) => ({
        at: start + durationMs(resend.at),
        order: 2000 + i,
        kind: "resend" as const,
        resend,
      })),
    ].sort((a, b) => a.at - b.at || a.order - b.order);
    for (const item of timeline) {
      await world.runUntil(item.at);
      if (world.unscripted) break;
      await world.advanceTo(item.at);
      const when = `at +${formatDuration(item.at - start)}`;
      if (item.kind === "event") {
        const { name, match, data, id: eventId } = item.event;
        await world
          .must("POST", "/v1/events", { name, match, data, ...(eventId === undefined ? {} : { id: eventId }) })
          .catch((e: Error) => {
            throw new RunnerError(`the event ${name} ${when}: ${e.message}`);
          });
      } else if (item.kind === "resend") {
        const r = item.resend;
        const answer = await fire(
          r.payload ?? trigger.payload,
          r.headers ?? trigger.headers,
          r.clientIdempotencyId ?? trigger.clientIdempotencyId,
        );
        resent.push({ at: item.at - start, executionId: answer.executionId, deduplicated: answer.deduplicated });
        world.adopt(answer.executionId);
      } else {
        const a = item.action;
        const newest = world.newest()!;
        const path = `/v1/executions/${newest}`;
        try {
          if (a.do === "cancel")
            await world.must("POST", `${path}/cancel`, a.releaseIdentity === undefined ? {} : { releaseIdentity: a.releaseIdentity });
          else if (a.do === "retry")
            await world.must(
              "POST",
              `${path}/steps/${encodeURIComponent(a.step!)}/retry`,
              a.acknowledgeForgottenKey === undefined ? {} : { acknowledgeForgottenKey: a.acknowledgeForgottenKey },
            );
          else world.adopt(((await world.must("POST", `${path}/start-over`, {})) as { executionId: string }).executionId);
        } catch (error) {
          throw new RunnerError(`the operator's ${a.do} ${when}: ${(error as Error).message}`);
        }
      }
    }
    await world.runUntil(start + durationMs(scenario.until, 30 * 86_400_000));
    const traces: unknown[] = [];
    for (const execution of world.executions) traces.push(await world.must("GET", `/v1/executions/${execution}`));
    return { world, resent, traces };
  } finally {
    world.close();
  }
}

/** Plays a scenario and checks it: null when it passes, else the failure message. */
export async function runScenario(
  files: WorkflowFiles,
  checked: Extract<Checked, { ok: true }>,
  scenario: Scenario,
): Promise<string | null> {
  let played: Played;
  try {
    played = await playScenario(files, checked, scenario);
  } catch (error) {
    if (error instanceof RunnerError) return `the run stopped: ${error.message}`;
    throw error;
  }
  const mismatches = await checkExpectations(scenario, played);
  return mismatches.length === 0 ? null : mismatches.join("\n");
}

export function describeProblems(file: string, problems: Problem[]): string {
  return [`${file} is not a valid scenario file:`, ...problems.map((p) => `  ${p.pointer || "(the file)"}: ${p.message}`)].join("\n");
}
