/**
 * The scenario file (`workflows/<id>.test.json`, SPEC section 19, docs/testing-workflows.md): the
 * zod schema the runner parses every file with, and the JSON Schema generated from it for editors
 * (schema/scenario.schema.json, `node scripts/scenario-schema.mjs`). Strict like the workflow's: an
 * unknown member is an error with its pointer. What a schema cannot state — the workflow exists, a
 * step id is one of its steps, answers only for Gateway steps — the runner checks against the saved
 * workflow (./validate.ts).
 */
import { z } from "zod";

/** A virtual time after the trigger: `90s`, `10m`, `1h`, `3d` (`0s` is the trigger's own time). */
const Duration = z
  .string()
  .regex(/^\d+(ms|s|m|h|d)$/, "is not a duration (such as `90s`, `10m`, `1h` or `3d`)")
  .describe("a virtual time after the trigger, such as `90s`, `10m`, `1h` or `3d`");

const HttpStatus = z
  .number()
  .int("is not an HTTP status (an integer from 100 to 599)")
  .min(100, "is not an HTTP status (an integer from 100 to 599)")
  .max(599, "is not an HTTP status (an integer from 100 to 599)");

const Headers = z.record(z.string(), z.string());

/** One scripted answer to one send of a Gateway step (a destination's answers are used in order). */
export const Answer = z
  .strictObject({
    status: HttpStatus.optional().describe("the HTTP status the destination answers"),
    headers: Headers.optional().describe("response headers (with `status`)"),
    body: z.unknown().optional().describe("the response body, any JSON (with `status`)"),
    retryAfter: z
      .number()
      .int()
      .min(0)
      .optional()
      .describe("seconds: adds `Retry-After` (with `status`, e.g. 429 or 503, or with `inProgress`)"),
    lose: z
      .literal(true)
      .optional()
      .describe("the call reaches the destination (it counts as an attempt) but its answer is lost: the engine sees a network error"),
    timeout: z
      .literal(true)
      .optional()
      .describe("the call reaches the destination and no answer comes within the step's `timeoutMs` (which elapses in virtual time)"),
    inProgress: z
      .literal(true)
      .optional()
      .describe("409 problem+json `idempotency-key-in-progress`: the destination is still working on this key"),
  })
  .superRefine((answer, ctx) => {
    const kinds = (["status", "lose", "timeout", "inProgress"] as const).filter((k) => answer[k] !== undefined);
    if (kinds.length !== 1) {
      ctx.addIssue({
        code: "custom",
        message:
          kinds.length === 0
            ? "an answer needs one of `status`, `lose`, `timeout` or `inProgress`"
            : `an answer is one of \`status\`, \`lose\`, \`timeout\` or \`inProgress\`, not ${kinds.map((k) => `\`${k}\``).join(" and ")}`,
      });
    }
    for (const member of ["headers", "body"] as const) {
      if (answer[member] !== undefined && answer.status === undefined)
        ctx.addIssue({ code: "custom", path: [member], message: `\`${member}\` goes with \`status\`` });
    }
    if (answer.retryAfter !== undefined && answer.status === undefined && answer.inProgress === undefined)
      ctx.addIssue({ code: "custom", path: ["retryAfter"], message: "`retryAfter` goes with `status` or `inProgress`" });
  })
  .describe("one answer: `status` (with `headers`, `body`, `retryAfter`), or `lose`, `timeout`, `inProgress`");
export type Answer = z.infer<typeof Answer>;

/** A Gateway step's scripted answers: a list (the sends' answers in order), or its sends' and its verify probes'. */
const Destination = z.union([
  z.array(Answer).describe("the answers to this step's sends, in order: the n-th send gets the n-th answer"),
  z
    .strictObject({
      answers: z.array(Answer).describe("the answers to this step's sends, in order"),
      probes: z.array(Answer).optional().describe("the answers to this step's verify probes, in order"),
      compensate: z
        .array(Answer)
        .optional()
        .describe('the answers to this step\'s undo calls (a step with `compensate`, docs/steps.md "Compensation"), in order'),
    })
    .describe("the answers to the sends, to the verify probes (a step with `verify`) and to the undo calls (a step with `compensate`)"),
]);

const Trigger = z
  .strictObject({
    payload: z.unknown().optional().describe("the trigger's JSON body (default `{}`)"),
    headers: Headers.optional().describe("request headers sent with the trigger"),
    clientIdempotencyId: z.string().min(1).optional().describe("`?clientIdempotencyId=`: the client's own id for this trigger"),
    schedule: z
      .literal(true)
      .optional()
      .describe("instead of a request: the next tick of the entry point's `schedule`, run by the real cron"),
  })
  .superRefine((t, ctx) => {
    if (t.schedule && (t.payload !== undefined || t.headers !== undefined || t.clientIdempotencyId !== undefined))
      ctx.addIssue({ code: "custom", message: "a schedule tick has no `payload`, `headers` or `clientIdempotencyId`" });
  })
  .describe("how the execution starts: POST /v1/workflows/{id}/trigger with this payload, or a schedule tick");

const Event = z
  .strictObject({
    at: Duration.optional().describe("when it is sent (default `0s`: once the trigger's work is done)"),
    name: z.string().min(1).describe("the event's name (a WAIT_FOR_EVENT's `event`)"),
    match: z.unknown().optional().describe("the value it correlates on (a wait's `match`)"),
    data: z.unknown().optional().describe("the event's data"),
    id: z.string().min(1).optional().describe("the sender's event id (deduplication); default none: deduplicated by content"),
  })
  .describe("POST /v1/events at a virtual time");

const Action = z
  .strictObject({
    at: Duration.optional().describe("when the operator acts (default `0s`)"),
    do: z.enum(["cancel", "retry", "startOver"]).describe("cancel the execution, retry a FAILED step, or start it over"),
    step: z.string().min(1).optional().describe("`retry`: the FAILED step"),
    releaseIdentity: z.boolean().optional().describe("`cancel`: end the trigger's dedupe window now"),
    acknowledgeForgottenKey: z.boolean().optional().describe("`retry`: send a key older than the destination's retention anyway"),
  })
  .superRefine((a, ctx) => {
    if (a.do === "retry" && a.step === undefined)
      ctx.addIssue({ code: "custom", path: ["step"], message: "`retry` names the FAILED `step`" });
    if (a.do !== "retry" && a.step !== undefined) ctx.addIssue({ code: "custom", path: ["step"], message: "only `retry` names a `step`" });
  })
  .describe("an operator action on the newest execution, at a virtual time");

const Resend = z
  .strictObject({
    at: Duration.describe("when the same trigger comes again"),
    payload: z.unknown().optional().describe("default: the trigger's payload"),
    headers: Headers.optional().describe("default: the trigger's headers"),
    clientIdempotencyId: z.string().min(1).optional().describe("default: the trigger's"),
  })
  .describe("the trigger again at a virtual time (its answer's `deduplicated` is expected in `expect.deduplicated`)");

const StepState = z.enum(["COMPLETED", "FAILED", "SKIPPED", "CANCELLED", "DISPATCHED", "EXECUTING", "NOT_REACHED"]);

/** What is expected of a step's undo calls (docs/steps.md "Compensation"): counted apart from its sends. */
const UndoExpect = z
  .strictObject({
    attempts: z
      .number()
      .int()
      .min(0)
      .optional()
      .describe("undo calls of this step that reached the (mocked) destination, over all executions (0: never compensated)"),
    key: z.string().optional().describe("the key every undo call carried (its own, never the step's)"),
    sameKey: z.literal(true).optional().describe("every undo call carried one and the same key"),
    request: z.unknown().optional().describe("a subset every undo call's JSON body contains"),
  })
  .describe("what is expected of one step's undo calls");

const StepExpect = z
  .strictObject({
    state: StepState.optional().describe("the step's state in the newest execution (`NOT_REACHED`: no row: never decided)"),
    attempts: z.number().int().min(0).optional().describe("sends of this step that reached the (mocked) destination, over all executions"),
    probes: z.number().int().min(0).optional().describe("verify probes of this step"),
    key: z.string().optional().describe("the destination key every send carried"),
    sameKey: z
      .literal(true)
      .optional()
      .describe("every send carried one and the same key (a MAP: every send of an item carried that item's one key)"),
    request: z.unknown().optional().describe("a subset every send's JSON body contains"),
    output: z.unknown().optional().describe("a subset the step's output (newest execution) contains"),
    error: z.string().optional().describe("a text the step's error contains"),
    compensate: UndoExpect.optional().describe("its undo calls (a step with `compensate`)"),
  })
  .describe("what is expected of one step");

const Expect = z
  .strictObject({
    status: z
      .enum(["RUNNING", "COMPLETED", "FAILED", "CANCELLED", "COMPENSATING", "COMPENSATED", "COMPENSATION_FAILED"])
      .optional()
      .describe("the newest execution's status when the run ends"),
    steps: z.record(z.string(), StepExpect).optional().describe("by step id"),
    sent: z.record(z.string(), z.number().int().min(0)).optional().describe("sends per Gateway step id (= its `attempts`)"),
    deduplicated: z.array(z.boolean()).optional().describe("each resend's answer, in order: was it deduplicated?"),
    executions: z.number().int().min(1).optional().describe("how many executions the scenario made (a start over is one more)"),
    assert: z
      .array(z.string().regex(/^=/, "an expression starts with `=`"))
      .optional()
      .describe(
        "JSONata expressions (starting with `=`) over { trace, executions, sends, resends } " +
          "that must all be true (docs/testing-workflows.md)",
      ),
  })
  .describe("what must hold once the run ends");

export const Scenario = z
  .strictObject({
    name: z.string().min(1).describe("what it shows, as a sentence"),
    description: z.string().optional(),
    secrets: z
      .record(z.string(), z.string())
      .optional()
      .describe("fake values for the workspace's secrets (default: every secret the workflow names gets `test-<NAME>`)"),
    trigger: Trigger,
    destinations: z
      .record(z.string(), Destination)
      .optional()
      .describe("by Gateway step id (or a MAP over a Gateway: its items' sends): its answers, in order"),
    events: z.array(Event).optional(),
    actions: z.array(Action).optional(),
    resend: z.array(Resend).optional(),
    until: Duration.optional().describe("how long the run may go on in virtual time (default `30d`)"),
    expect: Expect,
  })
  .describe("one run of the workflow in a mocked world, on a virtual clock");
export type Scenario = z.infer<typeof Scenario>;

export const ScenarioFile = z
  .strictObject({
    $schema: z.string().optional().describe("editor hint only (e.g. ../schema/scenario.schema.json)"),
    workflow: z.string().min(1).describe("the id of the workflow under test (a file in workflows/)"),
    scenarios: z.array(Scenario).min(1),
  })
  .describe("Scenarios for one workflow, run by `npm run test:workflows` through the real engine on a virtual clock");
export type ScenarioFile = z.infer<typeof ScenarioFile>;

export const SCENARIO_JSON_SCHEMA_PATH = "schema/scenario.schema.json";

/** schema/scenario.schema.json's text. */
export function scenarioJsonSchemaText(): string {
  const schema = z.toJSONSchema(ScenarioFile, { target: "draft-7", io: "input" }) as Record<string, unknown>;
  const { $schema, ...rest } = schema;
  return (
    JSON.stringify(
      {
        $schema,
        title: "idemflow scenario file",
        ...rest,
        description:
          "Scenarios for one workflow (workflows/<id>.test.json), run by `npm run test:workflows` through the real engine on a " +
          "virtual clock. Generated from test/workflows/scenario-schema.ts by `node scripts/scenario-schema.mjs`.",
      },
      null,
      2,
    ) + "\n"
  );
}
