/**
 * The key lint (SPEC section 2 and 5): a destination key — the declared `idempotencyKey.value`,
 * wherever it travels (a header of any name, a body field), or an `Idempotency-Key` header (any
 * letter case) — must not depend on time, randomness, the execution id or the attempt.
 *
 * Why: the key is what lets the destination recognise a repeat. A retry, a takeover after a lost
 * lease, an operator retry and a start-over must all send the same key for the same business
 * operation; a key built from `$now()`, `$random()`, `execution.id` or `attempt` is different each
 * time, so the destination would perform the operation again — the duplicate the key exists to stop.
 * A key that reads no business data at all is the opposite mistake: every execution would send the
 * same key and the destination would treat them all as one operation.
 *
 * The lint walks the compiled JSONata AST (never the source text), and over-approximates: a
 * forbidden source anywhere in the expression is reported, including inside an assignment
 * (`$x := $now()`), inside a function body, or handed over whole (`$$`, bare `execution`).
 */
import { compile } from "../expressions/evaluate";
import { ownMember } from "../lib/own-member";
import { childrenOf, isNode, type AstNode } from "./ast";
import type { ValidationError } from "./errors";
import { expressionSites, isIdempotencyKeyHeader, isKeySite } from "./expression-sites";
import { alwaysAbsentParts } from "./key-parts";
import { asRecord } from "./errors";
import { mapItemKeyProblem } from "./map-keys";
import { pointerOf } from "./pointer";
import { gatewayConfigs } from "./step-configs";

const ADVICE =
  "An Idempotency-Key must come from business data (`payload`, `steps`), e.g. " +
  "`= $idempotencyKey('charge', payload.order.id)`, so that retries, takeovers and start-overs send the same key " +
  "and the destination can deduplicate them.";

/** Functions whose result differs between calls. */
const FORBIDDEN_FUNCTIONS: Record<string, string> = {
  now: "returns the current time, so the key changes on every attempt",
  millis: "returns the current time, so the key changes on every attempt",
  random: "is random, so the key changes on every attempt",
  shuffle: "is random, so the key changes on every attempt",
  eval: "evaluates code the lint cannot check",
  attempt: "changes on every retry",
};

/** `execution.<field>` that are the same for every execution of the workflow. */
const STABLE_EXECUTION_FIELDS = new Set(["workflowId"]);

interface Finding {
  what: string;
  why: string;
  position: number | undefined;
  through: string[];
}

interface Scope {
  /** The context (`$`) is the root of the expression context here. */
  top: boolean;
  /** Variables / functions whose definition we are inside, innermost last. */
  through: string[];
}

export function checkIdempotencyKeys(document: unknown): ValidationError[] {
  const errors: ValidationError[] = [];

  // Literal keys are constants; they are not expression sites, so look at headers directly
  // (every Gateway: a top-level one and a MAP's step).
  for (const { config, base } of gatewayConfigs(document)) {
    for (const [name, value] of Object.entries(asRecord(config.headers) ?? {})) {
      if (isIdempotencyKeyHeader(name) && typeof value === "string" && !value.startsWith("=")) {
        errors.push({
          pointer: pointerOf(...base, "headers", name),
          code: "idempotency-key-constant",
          message:
            `this ${name} is a literal, so every execution sends the same key and the destination treats them all as one ` +
            `operation. ${ADVICE}`,
        });
      }
    }
  }

  for (const site of expressionSites(document)) {
    if (!isKeySite(site)) continue;
    let ast: AstNode;
    try {
      ast = compile(site.source).ast() as unknown as AstNode;
    } catch {
      continue; // the compile check reports it
    }
    for (const part of alwaysAbsentParts(site.source)) {
      errors.push({
        pointer: site.pointer,
        code: "idempotency-key-absent-part",
        message:
          `this ${site.headerName ?? "key"} is built from \`${part}\`, which is always absent (null or empty): a key must ` +
          `not collapse on absent data, and every run of this step would fail before it sends. Key on a business value. ${ADVICE}`,
      });
    }
    // An undo's key (`compensate`) may also key on `output`, the compensated step's answer (its charge id): business data.
    const { findings, readsBusinessData, readsItem, readsIndex } = lintKey(
      ast,
      site.map?.itemName ?? (site.compensation ? "output" : undefined),
    );
    for (const finding of findings) {
      const through = finding.through.length > 0 ? ` (reached through ${finding.through.join(" inside ")})` : "";
      const at = finding.position === undefined ? "" : ` at position ${finding.position}`;
      errors.push({
        pointer: site.pointer,
        code: "idempotency-key-unstable",
        message: `${finding.what}${at}${through} ${finding.why}. ${ADVICE}`,
      });
    }
    if (findings.length === 0 && site.map) {
      // Inside a MAP: one key per item, from the item's data (src/definitions/map-keys.ts); one error for one mistake.
      // A key a connector built from `keyFields` is taken back there by src/connectors/resolve.ts `authorsErrors`.
      const problem = mapItemKeyProblem({ readsItem, readsIndex }, site.map.itemName, `this ${site.headerName ?? "key"}`);
      if (problem) errors.push({ pointer: site.pointer, ...problem });
    } else if (findings.length === 0 && !readsBusinessData) {
      errors.push({
        pointer: site.pointer,
        code: "idempotency-key-constant",
        message:
          `this ${site.headerName ?? "key"} expression reads neither \`payload\` nor \`steps\`, so every execution sends the same ` +
          `key. ${ADVICE}`,
      });
    }
  }
  return errors;
}

/**
 * Exported for tests: the forbidden sources found in one key expression's AST. `itemName`: the key
 * is inside a MAP whose item goes by that name (a root field, business data like `payload`); then
 * `readsItem` and `readsIndex` say whether it reads the item and `index`.
 */
export function lintKey(
  ast: AstNode,
  itemName?: string,
): { findings: Finding[]; readsBusinessData: boolean; readsItem: boolean; readsIndex: boolean } {
  const findings: Finding[] = [];
  let readsBusinessData = false;
  let readsItem = false;
  let readsIndex = false;
  const report = (what: string, why: string, node: AstNode, scope: Scope) =>
    findings.push({ what, why, position: node.position, through: [...scope.through].reverse() });

  const visitChildren = (node: AstNode, scope: Scope) => {
    for (const { member, child } of childrenOf(node)) {
      // Filters and groups evaluate against the items of their input, not the root.
      const inner = member === "stages" || member === "predicate" || member === "group" ? { ...scope, top: false } : scope;
      visit(child, inner);
    }
  };

  /** A root field read: `execution…`, `attempt`, `payload…`, `steps…`. `rest` are the steps after it. */
  const rootField = (name: AstNode, rest: unknown[], scope: Scope) => {
    const field = name.value;
    // Inside a MAP its item's name reads the item, whatever the name (a reserved one is refused once, at `as`).
    if (itemName !== undefined && field === itemName) {
      readsBusinessData = readsItem = true;
      return;
    }
    if (field === "payload" || field === "steps") readsBusinessData = true;
    if (itemName !== undefined && field === "index") readsIndex = true;
    if (field === "attempt") report("`attempt`", FORBIDDEN_FUNCTIONS.attempt!, name, scope);
    if (field === "execution") {
      const next = rest[0];
      const stable =
        isNode(next) &&
        next.type === "name" &&
        typeof next.value === "string" &&
        STABLE_EXECUTION_FIELDS.has(next.value) &&
        !("stages" in name);
      if (!stable) {
        const shown = isNode(next) && next.type === "name" ? `\`execution.${String(next.value)}\`` : "`execution` (as a whole)";
        report(shown, "is different for every execution (a start-over creates a new one) or may contain its id", name, scope);
      }
    }
  };

  const visitPath = (node: AstNode, scope: Scope) => {
    const steps = Array.isArray(node.steps) ? node.steps.filter(isNode) : [];
    const head = steps[0];
    // `$$` is always the root; `$` is the root only where the context is the root.
    const rootHead = isNode(head) && head.type === "variable" && (head.value === "$" || (head.value === "" && scope.top));
    const first = rootHead ? 1 : 0;
    const atRoot = rootHead || scope.top;
    if (atRoot) {
      const step = steps[first];
      if (step === undefined) report("`$$`", "passes the whole context, which includes `execution.id`", head!, scope);
      else if (step.type === "name") rootField(step, steps.slice(first + 1), scope);
      else if (step.type === "wildcard" || step.type === "descendant") {
        report(`\`${String(step.value)}\` at the root`, "reaches every field of the context, including `execution.id`", step, scope);
      }
    }
    steps.forEach((step, k) => {
      const stepScope: Scope = { ...scope, top: k === 0 ? scope.top : k === first && rootHead };
      if (step.type === "name" || (k === 0 && rootHead)) {
        // The step itself was judged above; its filters run against its items.
        for (const { child } of childrenOf(step)) visit(child, { ...scope, top: false });
      } else {
        visit(step, stepScope);
      }
    });
    for (const { member, child } of childrenOf(node)) {
      if (member !== "steps") visit(child, { ...scope, top: false });
    }
  };

  const visit = (node: AstNode, scope: Scope): void => {
    switch (node.type) {
      case "variable": {
        const name = String(node.value);
        // Own members only: `$toString` or `$constructor` is a variable the expression may bind, not a forbidden function.
        const forbidden = ownMember(FORBIDDEN_FUNCTIONS, name);
        if (typeof forbidden === "string") report(`\`$${name}\``, forbidden, node, scope);
        else if (name === "$" || (name === "" && scope.top)) {
          report(name === "$" ? "`$$`" : "`$`", "passes the whole context, which includes `execution.id`", node, scope);
        }
        visitChildren(node, scope);
        return;
      }
      case "name":
        // A bare name outside a path (rare after JSONata's rewriting) reads a field of the context.
        if (scope.top) rootField(node, [], scope);
        visitChildren(node, { ...scope, top: false });
        return;
      case "path":
        visitPath(node, scope);
        return;
      case "bind": {
        const lhs = isNode(node.lhs) ? `\`$${String(node.lhs.value)}\`` : "a variable";
        if (isNode(node.rhs)) {
          const label = node.rhs.type === "lambda" ? `the function ${lhs}` : lhs;
          visit(node.rhs, { ...scope, through: [...scope.through, label] });
        }
        return;
      }
      case "lambda":
        // A function body may be called with the root as its context: judge it as if at the root.
        if (isNode(node.body)) visit(node.body, { ...scope, top: true });
        return;
      default:
        visitChildren(node, scope);
    }
  };

  visit(ast, { top: true, through: [] });
  return { findings, readsBusinessData, readsItem, readsIndex };
}
