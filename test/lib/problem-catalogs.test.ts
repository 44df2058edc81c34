/**
 * Every problem a client can see comes from a catalog (one per subsystem). This file calls every
 * constructor of every catalog once and holds three things true: each renders valid
 * problem+json, each catalog's union type is exactly the codes its constructors answer, and
 * docs/problems.md lists every code once, under the heading that names its catalog.
 */
import { describe, expect, expectTypeOf, it } from "vitest";
import problemsDoc from "../../docs/problems.md?raw";
import { PROBLEM_CONTENT_TYPE, problemType, type CatalogCode, type ProblemCatalog, type ProblemError } from "../../src/lib/problem";
import { commonProblems, type CommonProblemCode } from "../../src/lib/common-problems";
import { definitionProblems, type DefinitionProblemCode } from "../../src/definitions/problems";
import { idempotencyProblems, type IdempotencyProblemCode } from "../../src/http/idempotency/problems";
import { ingressProblems, type IngressProblemCode } from "../../src/ingress/problems";
import { executionProblems, type ExecutionProblemCode } from "../../src/steps/problems";
import { secretProblems, type SecretProblemCode } from "../../src/secrets/problems";
import { operatorProblems, type OperatorProblemCode } from "../../src/http/routes/operator";
import { demoProblems, type DemoProblemCode } from "../../demo/src/problems";
import { shardProblems, type ShardProblemCode } from "../../src/shards/problems";
import { eventProblems, type EventProblemCode } from "../../src/events/problems";
import { connectorProblems, type ConnectorProblemCode } from "../../src/connectors/problems";
import { httpProblems, type HttpProblemCode } from "../../src/http/problems";
import { notificationProblems, type NotificationProblemCode } from "../../src/notifications/problems";

/** One sample per constructor: a constructor added without a sample here does not compile. */
type Samples<Catalog extends ProblemCatalog<string>> = { [Name in keyof Catalog]: () => ProblemError };

const catalogs: Array<{ module: string; samples: Record<string, () => ProblemError> }> = [
  {
    module: "src/lib/common-problems.ts",
    samples: {
      unauthorized: () => commonProblems.unauthorized(),
      notFound: () => commonProblems.notFound('Workflow "orders"'),
      routeNotFound: () => commonProblems.routeNotFound(),
      malformedJson: () => commonProblems.malformedJson("The request body is empty"),
      jsonTooDeep: () => commonProblems.jsonTooDeep(20_000, 128),
      payloadTooLarge: () => commonProblems.payloadTooLarge(1024),
      internal: () => commonProblems.internal(),
    } satisfies Samples<typeof commonProblems>,
  },
  {
    module: "src/definitions/problems.ts",
    samples: {
      invalidDefinition: () => definitionProblems.invalidDefinition([{ pointer: "/id", code: "id-mismatch", message: "make them equal" }]),
      invalidVersion: () => definitionProblems.invalidVersion(),
      invalidLimit: () => definitionProblems.invalidLimit(),
    } satisfies Samples<typeof definitionProblems>,
  },
  {
    module: "src/http/idempotency/problems.ts",
    samples: {
      missing: () => idempotencyProblems.missing(),
      invalid: () => idempotencyProblems.invalid("it is empty"),
      mismatch: () => idempotencyProblems.mismatch(422),
      inProgress: () => idempotencyProblems.inProgress(1),
      lost: () => idempotencyProblems.lost(),
      tableMissing: () => idempotencyProblems.tableMissing(),
      ledgerError: () => idempotencyProblems.ledgerError(),
      responseTooLarge: () => idempotencyProblems.responseTooLarge(16384),
    } satisfies Samples<typeof idempotencyProblems>,
  },
  {
    module: "src/ingress/problems.ts",
    samples: {
      forceNewExecutionNotAllowed: () => ingressProblems.forceNewExecutionNotAllowed(),
      forceNewExecutionInvalid: () => ingressProblems.forceNewExecutionInvalid(),
      clientIdInvalid: () => ingressProblems.clientIdInvalid(),
      clientIdNotSigned: () => ingressProblems.clientIdNotSigned(),
      fieldsNeedJson: () => ingressProblems.fieldsNeedJson(["order.id"]),
      fieldMissing: () => ingressProblems.fieldMissing(["order.id"]),
      fieldEmpty: () => ingressProblems.fieldEmpty(["order.id"]),
      numberOutOfRange: () => ingressProblems.numberOutOfRange({ pointer: "/id", literal: "12345678901234567891" }, "body"),
      storedPayloadTooLarge: () =>
        ingressProblems.storedPayloadTooLarge({ bodyBytes: 1_000_000, storedBytes: 6_000_002, limitBytes: 1_500_000 }),
      edgeConditionFailed: () => ingressProblems.edgeConditionFailed("T1003: unknown function"),
      hookNotFound: () => ingressProblems.hookNotFound(),
      signatureMissing: () => ingressProblems.signatureMissing("x-idemflow-signature", "x-idemflow-timestamp"),
      signatureVersionUnsupported: () => ingressProblems.signatureVersionUnsupported("sha256", "x-idemflow-signature"),
      signatureStale: () => ingressProblems.signatureStale("x-idemflow-timestamp", 300),
      signatureInvalid: () => ingressProblems.signatureInvalid(),
      secretMissing: () => ingressProblems.secretMissing(),
      deliveryRejected: () => ingressProblems.deliveryRejected(),
      deliveryUnavailable: () => ingressProblems.deliveryUnavailable("30"),
    } satisfies Samples<typeof ingressProblems>,
  },
  {
    module: "src/steps/problems.ts",
    samples: {
      invalidStatus: () => executionProblems.invalidStatus(["RUNNING", "COMPLETED", "FAILED"], "DONE"),
      invalidLimit: () => executionProblems.invalidLimit(),
      invalidTime: () => executionProblems.invalidTime("since", "yesterday"),
      invalidFlag: () => executionProblems.invalidFlag("retried", "yes"),
      invalidParameter: () => executionProblems.invalidParameter("cursor", "Invalid input: expected string"),
      invalidCursor: () => executionProblems.invalidCursor(),
      stepNotFailed: () => executionProblems.stepNotFailed({ executionId: "e1", vertexId: "charge" }, "COMPLETED"),
      retryBodyInvalid: () => executionProblems.retryBodyInvalid('Unknown member "force"'),
      keyMayBeForgotten: () => executionProblems.keyMayBeForgotten({ executionId: "e1", vertexId: "charge" }),
      executionRunning: () => executionProblems.executionRunning("e1"),
      liveExecutionExists: () => executionProblems.liveExecutionExists("e1", "e2"),
      executionNotCancellable: () => executionProblems.executionNotCancellable("e1", "COMPLETED"),
      executionCancelled: () => executionProblems.executionCancelled({ executionId: "e1", vertexId: "charge" }),
      executionCompensation: () => executionProblems.executionCompensation({ executionId: "e1", vertexId: "ship" }, "COMPENSATED"),
      cancelBodyInvalid: () => executionProblems.cancelBodyInvalid('Unknown member "force"'),
      executionSuperseded: () => executionProblems.executionSuperseded("e1", "e2"),
      executionNotRetained: () =>
        executionProblems.executionNotRetained(
          { id: "e1", reason: "retention", removedAt: 1_900_000_000_000, archived: false },
          "not-archived",
        ),
      executionRemoved: () =>
        executionProblems.executionRemoved({ id: "e1", reason: "retention", removedAt: 1_900_000_000_000, archived: true }),
      executionChainRunning: () => executionProblems.executionChainRunning("e1", ["e2"]),
      executionChainTooLong: () => executionProblems.executionChainTooLong("e1", 200),
      erasureConflict: () => executionProblems.erasureConflict("e1"),
      archiveUnbound: () => executionProblems.archiveUnbound("e1"),
      executionNotCompensationFailed: () => executionProblems.executionNotCompensationFailed("e1", "COMPENSATED", "retry"),
      resolveBodyInvalid: () => executionProblems.resolveBodyInvalid("note is required"),
    } satisfies Samples<typeof executionProblems>,
  },
  {
    module: "src/secrets/problems.ts",
    samples: {
      nameInvalid: () => secretProblems.nameInvalid("1st"),
      nameReserved: () => secretProblems.nameReserved("API_TOKENS"),
      bodyInvalid: () => secretProblems.bodyInvalid(4096),
      valueInvalid: () => secretProblems.valueInvalid(4096),
      masterKeyMissing: () => secretProblems.masterKeyMissing(),
    } satisfies Samples<typeof secretProblems>,
  },
  {
    module: "src/notifications/problems.ts",
    samples: {
      shape: () => notificationProblems.shape("/url", "`url` is required"),
      urlNotAllowed: () => notificationProblems.urlNotAllowed("hooks.example", "hooks.example:443"),
      secretInClear: () => notificationProblems.secretInClear(),
      secretMissing: () => notificationProblems.secretMissing("NOTIFY"),
      secretNotWebhook: () => notificationProblems.secretNotWebhook("NOTIFY"),
      eventUnknown: () => notificationProblems.eventUnknown(0, "execution.done", ["execution.failed"]),
      stuckThresholdMissing: () => notificationProblems.stuckThresholdMissing(),
    } satisfies Samples<typeof notificationProblems>,
  },
  {
    module: "src/shards/problems.ts",
    samples: {
      misconfigured: () => shardProblems.misconfigured('D1_SHARDS names "DB_9", but the Worker has no D1 binding of that name.'),
      unknownShard: () => shardProblems.unknownShard(3, 2),
      schemaBehind: () => shardProblems.schemaBehind(1, "0017_history.sql", "0018_workspace_placements.sql"),
      workspaceMisplaced: () => shardProblems.workspaceMisplaced("other", 1, 0),
    } satisfies Samples<typeof shardProblems>,
  },
  {
    module: "src/events/problems.ts",
    samples: {
      invalid: () => eventProblems.invalid("/match", "it is an empty string"),
      sourceNotFound: () => eventProblems.sourceNotFound("payments"),
      sourceInvalid: () => eventProblems.sourceInvalid([{ pointer: "/match", message: "the expression does not compile" }]),
      extractFailed: () => eventProblems.extractFailed("payments", "match", "gave nothing"),
      signatureMissing: () => eventProblems.signatureMissing("standard-webhooks"),
      signatureStale: () => eventProblems.signatureStale("v1", "x-idemflow-timestamp", 300),
      signatureInvalid: () => eventProblems.signatureInvalid("standard-webhooks"),
      sourceUnavailable: () => eventProblems.sourceUnavailable(),
    } satisfies Samples<typeof eventProblems>,
  },
  {
    module: "src/connectors/problems.ts",
    samples: {
      invalid: () => connectorProblems.invalid([{ pointer: "/baseUrl", code: "invalid-url", message: "an absolute http(s) URL" }]),
      keylessWriteRefused: () =>
        connectorProblems.keylessWriteRefused([{ pointer: "/vertices/1/config", code: "write-without-key", message: "declare a key" }]),
    } satisfies Samples<typeof connectorProblems>,
  },
  {
    module: "src/http/problems.ts",
    samples: {
      tokensNotConfigured: () => httpProblems.tokensNotConfigured(),
      methodNotAllowed: () => httpProblems.methodNotAllowed("DELETE", "/v1/workflows/orders", ["GET", "PUT", "HEAD"]),
      queryParameterUnknown: () => httpProblems.queryParameterUnknown(["staus"], ["status", "limit"]),
    } satisfies Samples<typeof httpProblems>,
  },
  {
    module: "src/http/routes/operator.ts",
    samples: {
      operatorTokenRequired: () => operatorProblems.operatorTokenRequired(),
    } satisfies Samples<typeof operatorProblems>,
  },
  {
    module: "demo/src/problems.ts",
    samples: {
      faultAfterCommit: () => demoProblems.faultAfterCommit(1),
      faultInvalid: () => demoProblems.faultInvalid(["`count` must be an integer from 1 to 1000"]),
      unauthorized: () => demoProblems.unauthorized(),
      chargeInvalid: () => demoProblems.chargeInvalid(),
      bodyNotObject: () => demoProblems.bodyNotObject(),
      legacyExternalIdMissing: () => demoProblems.legacyExternalIdMissing(),
      legacyDuplicate: () => demoProblems.legacyDuplicate("A-1001"),
      checkoutKeyInvalid: () => demoProblems.checkoutKeyInvalid(45, 50),
      checkoutKeyReused: () => demoProblems.checkoutKeyReused(),
    } satisfies Samples<typeof demoProblems>,
  },
];

const entries = catalogs.flatMap(({ module, samples }) =>
  Object.entries(samples).map(([name, sample]) => ({ module, name, problem: sample() })),
);

/** docs/problems.md as `## heading` sections, each with the codes of its table rows (`| \`code\` | status | …`). */
function documentedSections(markdown: string): Array<{ heading: string; rows: Array<{ code: string; status: string }> }> {
  return markdown
    .split(/^## /m)
    .slice(1)
    .map((section) => ({
      heading: section.split("\n", 1)[0]!,
      rows: [...section.matchAll(/^\| `([a-z0-9-]+)` \| ([^|]+) \|/gm)].map((m) => ({ code: m[1]!, status: m[2]!.trim() })),
    }));
}

describe("problem catalogs", () => {
  it.each(entries)("$module $name renders valid problem+json", async ({ problem }) => {
    const response = problem.toResponse();
    expect(response.status).toBe(problem.status);
    expect(problem.status).toBeGreaterThanOrEqual(400);
    expect(problem.status).toBeLessThan(600);
    expect(response.headers.get("content-type")).toBe(PROBLEM_CONTENT_TYPE);
    for (const [name, value] of Object.entries(problem.headers)) expect(response.headers.get(name)).toBe(value);
    const body = (await response.json()) as Record<string, unknown>;
    expect(problem.code).toMatch(/^[a-z0-9]+(-[a-z0-9]+)*$/);
    expect(body).toMatchObject({ type: problemType(problem.code), code: problem.code, status: problem.status });
    expect(body.title).toEqual(expect.stringMatching(/\S/));
    expect(body.detail).toEqual(expect.stringMatching(/\S/));
    // Extensions sit beside the standard members and never replace one.
    for (const member of ["type", "code", "title", "status", "detail"]) expect(Object.keys(problem.extensions)).not.toContain(member);
  });

  it("each catalog's union type is exactly the codes its constructors answer", () => {
    expectTypeOf<CatalogCode<typeof commonProblems>>().toEqualTypeOf<CommonProblemCode>();
    expectTypeOf<CatalogCode<typeof definitionProblems>>().toEqualTypeOf<DefinitionProblemCode>();
    expectTypeOf<CatalogCode<typeof idempotencyProblems>>().toEqualTypeOf<IdempotencyProblemCode>();
    expectTypeOf<CatalogCode<typeof ingressProblems>>().toEqualTypeOf<IngressProblemCode>();
    expectTypeOf<CatalogCode<typeof executionProblems>>().toEqualTypeOf<ExecutionProblemCode>();
    expectTypeOf<CatalogCode<typeof secretProblems>>().toEqualTypeOf<SecretProblemCode>();
    expectTypeOf<CatalogCode<typeof notificationProblems>>().toEqualTypeOf<NotificationProblemCode>();
    expectTypeOf<CatalogCode<typeof operatorProblems>>().toEqualTypeOf<OperatorProblemCode>();
    expectTypeOf<CatalogCode<typeof shardProblems>>().toEqualTypeOf<ShardProblemCode>();
    expectTypeOf<CatalogCode<typeof eventProblems>>().toEqualTypeOf<EventProblemCode>();
    expectTypeOf<CatalogCode<typeof connectorProblems>>().toEqualTypeOf<ConnectorProblemCode>();
    expectTypeOf<CatalogCode<typeof httpProblems>>().toEqualTypeOf<HttpProblemCode>();
    expectTypeOf<CatalogCode<typeof demoProblems>>().toEqualTypeOf<DemoProblemCode>();
  });

  it("no code belongs to two catalogs", () => {
    const owner = new Map<string, string>();
    for (const { module, problem } of entries) {
      expect(owner.get(problem.code) ?? module, problem.code).toBe(module);
      owner.set(problem.code, module);
    }
  });

  it("docs/problems.md lists every code once, with its status, under the heading naming its catalog, and nothing else", () => {
    const sections = documentedSections(problemsDoc);
    const rows = sections.flatMap(({ heading, rows }) => rows.map((row) => ({ heading, ...row })));
    const codes = new Set(entries.map((e) => e.problem.code));
    for (const { module, problem } of entries) {
      const listed = rows.filter((row) => row.code === problem.code);
      expect(listed, problem.code).toHaveLength(1);
      expect(listed[0]!.heading, problem.code).toContain(`(${module}`);
      expect(listed[0]!.status, problem.code).toMatch(new RegExp(`^${problem.status}\\b`));
    }
    expect(rows.map((row) => row.code).filter((code) => !codes.has(code))).toEqual([]);
  });
});
