/**
 * The scenario runner held to its own word: scenario files that must not check (each problem with
 * its pointer) and scenarios that must fail (each failure message), against the shipped
 * order-fulfilment workflow and its connectors.
 */
import { env } from "cloudflare:test";
import { beforeAll, describe, expect, it, vi } from "vitest";
import { checkScenarioFile, runScenario, type Problem } from "./runner";

const files = env.TEST_WORKFLOW_FILES;

beforeAll(() => {
  for (const method of ["log", "warn", "error"] as const) vi.spyOn(console, method).mockImplementation(() => undefined);
});

const ok = { charge: [{ status: 201, body: { id: "ch_1" } }], ship: [{ status: 201, body: { id: "lb_1" } }] };
const scenario = (more: Record<string, unknown> = {}) => ({
  name: "s",
  trigger: { payload: { order: { id: "A-1", total: 5 } } },
  destinations: ok,
  expect: { status: "COMPLETED" },
  ...more,
});
const file = (scenarios: unknown[], workflow = "order-fulfilment") => JSON.stringify({ workflow, scenarios });

async function problemsOf(text: string): Promise<Problem[]> {
  const checked = await checkScenarioFile(files, "workflows/x.test.json", text);
  expect(checked.ok).toBe(false);
  return checked.ok ? [] : checked.problems;
}

/** The failure message of the file's only scenario (null: it passed). */
async function failureOf(s: Record<string, unknown>): Promise<string | null> {
  const text = file([s]);
  const checked = await checkScenarioFile(files, "workflows/x.test.json", text);
  if (!checked.ok) throw new Error(JSON.stringify(checked.problems));
  return runScenario(files, checked, checked.parsed.scenarios[0]!);
}

describe("a scenario file that does not check is reported with its pointers", () => {
  it("malformed JSON", async () => {
    const [p] = await problemsOf('{ "workflow": "order-fulfilment", ');
    expect(p).toMatchObject({ pointer: "" });
    expect(p!.message).toMatch(/^not valid JSON: /);
  });

  it("unknown members, answers that are not HTTP statuses, an answer of two kinds", async () => {
    const s = scenario({
      destinations: { charge: [{ status: 700 }, { status: 201, lose: true }], ship: [{ status: 201, bogus: 1 }] },
      expect: { stauts: "COMPLETED" },
    });
    expect(await problemsOf(file([s]))).toEqual(
      expect.arrayContaining([
        { pointer: "/scenarios/0/destinations/charge/0/status", message: "is not an HTTP status (an integer from 100 to 599)" },
        {
          pointer: "/scenarios/0/destinations/charge/1",
          message: "an answer is one of `status`, `lose`, `timeout` or `inProgress`, not `status` and `lose`",
        },
        { pointer: "/scenarios/0/destinations/ship/0/bogus", message: 'unknown member "bogus"' },
        { pointer: "/scenarios/0/expect/stauts", message: 'unknown member "stauts"' },
      ]),
    );
  });

  it("an unknown workflow", async () => {
    const [p] = await problemsOf(file([scenario()], "order-fulfillment"));
    expect(p!.pointer).toBe("/workflow");
    expect(p!.message).toMatch(/^no workflow "order-fulfillment" in workflows\/ \(there are: .*order-fulfilment/);
  });

  it("a step that does not exist, answers for a step that is not a Gateway, expectations on steps that are not there", async () => {
    const s = scenario({
      destinations: { ...ok, chrage: [{ status: 201 }], received: [{ status: 200 }] },
      expect: { steps: { nope: { state: "COMPLETED" } }, sent: { received: 1 } },
    });
    expect(await problemsOf(file([s]))).toEqual([
      {
        pointer: "/scenarios/0/destinations/chrage",
        message: 'no step "chrage" in workflow order-fulfilment (its steps: received, charge, ship)',
      },
      {
        pointer: "/scenarios/0/destinations/received",
        message: 'step "received" is a ENTRY_POINT, not a GATEWAY: only a Gateway step (or a MAP over one) calls a destination',
      },
      {
        pointer: "/scenarios/0/expect/steps/nope",
        message: 'no step "nope" in workflow order-fulfilment (its steps: received, charge, ship)',
      },
      {
        pointer: "/scenarios/0/expect/sent/received",
        message: 'step "received" is a ENTRY_POINT, not a GATEWAY: only a Gateway step (or a MAP over one) calls a destination',
      },
    ]);
  });

  it("one `deduplicated` per resend; a schedule tick without a schedule; an assert that does not compile", async () => {
    const s = scenario({ resend: [{ at: "1m" }], expect: { deduplicated: [true, true], assert: ["= trace.("] } });
    const t = scenario({ trigger: { schedule: true } });
    const u = scenario({ trigger: { payload: {}, headers: { Prefer: "wait=10" } } });
    expect(await problemsOf(file([s, t, u]))).toEqual([
      { pointer: "/scenarios/0/expect/deduplicated", message: "2 answers expected for 1 resend: one per resend" },
      { pointer: "/scenarios/0/expect/assert/0", message: expect.stringMatching(/^does not compile: /) },
      { pointer: "/scenarios/1/trigger/schedule", message: "workflow order-fulfilment's entry point has no `schedule`" },
      {
        pointer: "/scenarios/2/trigger/headers/Prefer",
        message: "`Prefer: wait` waits in real time while the runner holds the queue (nothing would run): leave it out",
      },
    ]);
  });
});

describe('undo calls (`compensate`, docs/steps.md "Compensation") are scripted and checked like sends', () => {
  const refund = (compensate: unknown[], more: Record<string, unknown> = {}) => ({
    name: "r",
    trigger: { payload: { order: { id: "R-9", total: 5, address: "undeliverable" } } },
    destinations: { charge: { answers: [{ status: 201, body: { id: "ch_9" } }], compensate }, ship: [{ status: 422 }] },
    expect: { status: "COMPENSATED" },
    ...more,
  });

  it("an invalid compensate answer list is reported at its pointer (the object form's problems, not the list form's)", async () => {
    const problems = await problemsOf(file([refund([{ status: 201 }, {}, { lose: true, timeout: true }])], "order-with-refund"));
    expect(problems).toEqual([
      {
        pointer: "/scenarios/0/destinations/charge/compensate/1",
        message: "an answer needs one of `status`, `lose`, `timeout` or `inProgress`",
      },
      {
        pointer: "/scenarios/0/destinations/charge/compensate/2",
        message: "an answer is one of `status`, `lose`, `timeout` or `inProgress`, not `lose` and `timeout`",
      },
    ]);
    expect(await problemsOf(file([refund({ status: 201 } as unknown as unknown[])], "order-with-refund"))).toEqual([
      { pointer: "/scenarios/0/destinations/charge/compensate", message: expect.stringMatching(/expected array/) },
    ]);
  });

  it("undo answers or expectations for a step that declares no `compensate`", async () => {
    const s = scenario({
      destinations: { charge: { answers: ok.charge, compensate: [{ status: 201 }] }, ship: ok.ship },
      expect: { steps: { ship: { compensate: { attempts: 0 } } } },
    });
    expect(await problemsOf(file([s]))).toEqual([
      { pointer: "/scenarios/0/destinations/charge/compensate", message: 'step "charge" declares no `compensate`: it makes no undo calls' },
      { pointer: "/scenarios/0/expect/steps/ship/compensate", message: 'step "ship" declares no `compensate`: it makes no undo calls' },
    ]);
  });

  it("an unscripted undo call stops the run; undo attempts, key, sameKey and request are checked apart from the sends", async () => {
    const text = (s: Record<string, unknown>) => file([s], "order-with-refund");
    const run = async (s: Record<string, unknown>) => {
      const checked = await checkScenarioFile(files, "workflows/x.test.json", text(s));
      if (!checked.ok) throw new Error(JSON.stringify(checked.problems));
      return runScenario(files, checked, checked.parsed.scenarios[0]!);
    };
    const unscripted = await run(refund([]));
    expect(unscripted!.split("\n")[0]).toBe(
      "unscripted undo call of charge attempt 1 (POST http://localhost:8788/refunds/lines): " +
        "the scenario scripts 0 answer(s) for charge's undo calls (`compensate`)",
    );
    const message = await run(
      refund([{ lose: true }, { status: 201 }], {
        expect: {
          status: "COMPENSATION_FAILED",
          steps: { charge: { attempts: 1, compensate: { attempts: 1, key: "charge-R-9", request: { amount: 6 } } } },
        },
      }),
    );
    expect(message!.split("\n").filter((l) => !l.startsWith("    "))).toEqual([
      "status: expected COMPENSATION_FAILED, actual COMPENSATED",
      "steps.charge.compensate.attempts: expected 1, actual 2",
      "steps.charge.compensate.key: expected charge-R-9, actual refund-R-9-charge (undo attempt 1)",
      "steps.charge.compensate.request (undo attempt 1's body) /amount: expected 6, actual 5",
    ]);
    expect(message).toMatch(/ {4}charge undo attempt 1 at \+\S+: key refund-R-9-charge, body .* → lost/);
  });
});

describe("a scenario that disagrees fails with what disagrees and the trace excerpt", () => {
  it("passes when the world answers as scripted", async () => {
    expect(await failureOf(scenario({ expect: { status: "COMPLETED", sent: { charge: 1, ship: 1 } } }))).toBeNull();
  });

  it("a call the scenario did not script stops the run — never a network call", async () => {
    const message = await failureOf(scenario({ destinations: { charge: [{ status: 500 }] } }));
    expect(message!.split("\n")).toEqual([
      "unscripted call to charge attempt 2 (POST http://localhost:8788/payments/charges): the scenario scripts 1 answer(s) for charge",
      '    charge attempt 1 at +0s: key charge-A-1, body {"order":"A-1","amount":5} → 500',
      '    charge attempt 2 at +1s: key charge-A-1, body {"order":"A-1","amount":5} → unscripted',
      expect.stringMatching(/^ {4}charge: DISPATCHED — attempt 2: .*network error: scenario: unscripted call to charge attempt 2/),
    ]);
  });

  it("a status changed by hand: the status, and the step that decided it", async () => {
    const message = await failureOf(scenario({ destinations: { charge: [{ status: 402, body: { error: "card_declined" } }] } }));
    expect(message!.split("\n").slice(0, 2)).toEqual([
      "status: expected COMPLETED, actual FAILED",
      '    charge attempt 1 at +0s: key charge-A-1, body {"order":"A-1","amount":5} → 402',
    ]);
    expect(message).toMatch(/ {4}charge: FAILED — POST localhost:8788\/payments\/charges answered 402/);
  });

  it("attempts, key, sameKey, request, output and state, each with the step's sends", async () => {
    const message = await failureOf(
      scenario({
        destinations: { charge: [{ lose: true }, { status: 201, body: { id: "ch_1" } }], ship: ok.ship },
        expect: {
          steps: {
            charge: { attempts: 1, key: "charge-A-2", request: { amount: 6 }, output: { body: { id: "ch_9" } } },
            ship: { state: "FAILED" },
          },
        },
      }),
    );
    const firstLines = message!.split("\n").filter((l) => !l.startsWith("    "));
    expect(firstLines).toEqual([
      "steps.charge.attempts: expected 1, actual 2",
      "steps.charge.key: expected charge-A-2, actual charge-A-1 (attempt 1)",
      "steps.charge.request (attempt 1's body) /amount: expected 6, actual 5",
      'steps.charge.output /body/id: expected "ch_9", actual "ch_1"',
      "steps.ship.state: expected FAILED, actual COMPLETED",
    ]);
    expect(message).toContain('    charge attempt 1 at +0s: key charge-A-1, body {"order":"A-1","amount":5} → lost');
  });

  it("sends per step, a resend's deduplication, the number of executions, an assertion over the trace", async () => {
    const message = await failureOf(
      scenario({
        resend: [{ at: "1h" }],
        expect: {
          sent: { ship: 2 },
          deduplicated: [false],
          executions: 2,
          assert: ["= $count(sends[step = 'charge']) = 2", "= trace.status"],
        },
      }),
    );
    const firstLines = message!.split("\n").filter((l) => !l.startsWith("    "));
    expect(firstLines).toEqual([
      expect.stringMatching(/^executions: expected 2, actual 1 \(\w{12}… COMPLETED\)$/),
      "deduplicated[0] (the resend at +1h): expected false, actual true",
      "sent.ship: expected 2, actual 1",
      "assert[0] = $count(sends[step = 'charge']) = 2: expected true, actual false",
      'assert[1] = trace.status: expected true, actual "COMPLETED"',
    ]);
    expect(message).toMatch(/ {4}it answered execution \w+ \(the trigger's\)/);
  });
});
