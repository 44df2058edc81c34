/**
 * What each step can read: the other steps' outputs (and whether the payload) its expressions can
 * reach. A step's claim loads only those (src/ledger/step-inputs.ts `readStepInputs`), so a workflow
 * with many large outputs does not rebuild all of them into one value on every claim — D1 refuses
 * values and rows over 2,000,000 bytes (SPEC section 11).
 *
 * A vertex reads through its own config's expressions and through the `when` of every edge it
 * evaluates while settling: its outgoing edges, and the entry point's edges, which the first
 * settle of an execution backfills when ingress did not record them (`backfill` below).
 *
 * Computed from the compiled expressions (JSONata's AST), once per saved version, and stored with
 * it, so the claim batch can select the inputs in SQL before any JavaScript sees the definition.
 * The analysis is conservative: every reference it cannot pin to one step id reads everything.
 * Static: `steps.charge`, `steps.\`my-step\``, `$.steps.charge`, `$$.steps.charge`. Dynamic (all):
 * `steps` itself (as in `$lookup(steps, …)`, `$keys(steps)`, `$each(steps, …)`, `$s := steps`),
 * `steps.*`, `steps[…]`, `steps.(…)`, `$$` or the root `$` on their own, `*` or `**` at the root,
 * the parent operator `%`, and `$eval`. An analysis that misses a reference would let a `when`
 * see a missing output that exists, so the rules only ever err towards loading more.
 */
import { compile } from "../expressions/evaluate";
import { childrenOf, isNode, type AstNode } from "./ast";
import { expressionSites } from "./expression-sites";
import { entryPointOf, type WorkflowDefinition } from "./schema";

/**
 * Bumped whenever the analysis changes: a version stored under another one loads everything.
 * 2: a MAP's expressions (`items`, `collect`, its step's) count as the MAP's own; the item's name
 * and `index` are roots of their own there (never `payload` or `steps`: a reserved name is refused).
 */
export const STEP_INPUTS_VERSION = 2;

export interface StepInputs {
  /** Reads `steps` dynamically: every completed output. */
  all: boolean;
  /** Reads the payload (or the entry step's output, which is the payload). */
  payload: boolean;
  /** The ids of the steps whose outputs it reads (the entry excluded: it reads the payload). */
  steps: string[];
}

export interface StepInputsSpec {
  v: number;
  vertices: Record<string, StepInputs>;
  /** What the entry point's edges read: needed by the settle that backfills them. */
  backfill: StepInputs;
}

interface Refs {
  all: boolean;
  payload: boolean;
  steps: Set<string>;
}

const ROOT_VARIABLES = new Set(["", "$"]);
/** Members whose expressions run once per item of the value before them, so `$` is that item. */
const PER_ITEM_MEMBERS = new Set(["stages", "predicate", "group", "terms"]);

/** The root name a path starts from, if it starts at the root: `steps.x`, `$.steps.x`, `$$.steps.x`. */
function rootSteps(path: AstNode[]): { name: string; rest: AstNode[]; head: AstNode } | null {
  let i = 0;
  const first = path[0];
  if (first?.type === "variable" && ROOT_VARIABLES.has(String(first.value)) && path[1]?.type === "name") i = 1;
  const head = path[i];
  if (head?.type !== "name" || typeof head.value !== "string") return null;
  return { name: head.value, rest: path.slice(i + 1), head };
}

function hasPerItemParts(node: AstNode): boolean {
  return [...PER_ITEM_MEMBERS, "focus", "tuple", "index"].some((m) => node[m] !== undefined && node[m] !== false);
}

function visit(node: AstNode, perItem: boolean, refs: Refs): void {
  if (refs.all) return;
  switch (node.type) {
    case "path": {
      const steps = (Array.isArray(node.steps) ? node.steps : []).filter(isNode);
      const root = rootSteps(steps);
      if (root) {
        if (root.name === "payload") refs.payload = true;
        if (root.name === "steps") {
          const next = root.rest[0];
          if (hasPerItemParts(root.head) || next?.type !== "name" || typeof next.value !== "string") refs.all = true;
          else refs.steps.add(next.value);
        }
      } else if (steps[0]?.type === "wildcard" || steps[0]?.type === "descendant") {
        refs.all = true; // `*` / `**` at the root walk into `steps`
      }
      steps.forEach((step, i) => {
        const rootVariable = i === 0 && step.type === "variable" && root !== null;
        if (step.type === "name" || rootVariable || (i > 0 && step.type === "variable" && step.value === "")) {
          // The step itself is a plain key (or the context item); only its stages hold expressions.
          for (const { member, child } of childrenOf(step)) visit(child, perItem || PER_ITEM_MEMBERS.has(member), refs);
        } else visit(step, perItem || i > 0, refs);
      });
      // A group-by on the whole path (`x{…}`) runs per item too.
      for (const { member, child } of childrenOf(node)) if (member !== "steps") visit(child, true, refs);
      return;
    }
    case "name":
      // A bare name outside a path (not produced by JSONata's parser today): read it as a root.
      if (node.value === "steps") refs.all = true;
      if (node.value === "payload") refs.payload = true;
      break;
    case "variable":
      // `$$` is always the root; `$` is the root unless it stands for the item being filtered.
      if (node.value === "$" || (node.value === "" && !perItem)) refs.all = true;
      break;
    case "parent":
      refs.all = true;
      break;
    case "function":
    case "partial":
      if (isNode(node.procedure) && node.procedure.type === "variable" && node.procedure.value === "eval") refs.all = true;
      break;
  }
  for (const { member, child } of childrenOf(node)) visit(child, perItem || PER_ITEM_MEMBERS.has(member), refs);
}

/** The references of one expression (JSONata source without the leading `=`). */
export function expressionRefs(source: string): Refs {
  const refs: Refs = { all: false, payload: false, steps: new Set() };
  try {
    visit(compile(source).ast() as unknown as AstNode, false, refs);
  } catch {
    refs.all = true; // cannot happen for a validated definition; load everything if it does
  }
  return refs;
}

function merge(into: Refs, from: Refs): void {
  into.all ||= from.all;
  into.payload ||= from.payload;
  for (const id of from.steps) into.steps.add(id);
}

function finish(refs: Refs, entryId: string): StepInputs {
  const readsEntry = refs.steps.has(entryId);
  return {
    all: refs.all,
    payload: refs.all || refs.payload || readsEntry,
    steps: refs.all ? [] : [...refs.steps].filter((id) => id !== entryId).sort(),
  };
}

/** Every vertex's inputs, for a validated definition. */
export function stepInputsOf(definition: WorkflowDefinition): StepInputsSpec {
  const entryId = entryPointOf(definition).id;
  const own = new Map(definition.vertices.map((v) => [v.id, { all: false, payload: false, steps: new Set<string>() } as Refs]));
  const backfill: Refs = { all: false, payload: false, steps: new Set() };
  for (const site of expressionSites(definition)) {
    const refs = expressionRefs(site.source);
    const vertexAt = /^\/vertices\/(\d+)\//.exec(site.pointer);
    const edgeAt = /^\/edges\/(\d+)\/when$/.exec(site.pointer);
    const vertexId = vertexAt
      ? definition.vertices[Number(vertexAt[1])]?.id
      : edgeAt
        ? definition.edges[Number(edgeAt[1])]?.from
        : undefined;
    if (vertexId === undefined) continue;
    merge(own.get(vertexId)!, refs);
    if (edgeAt && vertexId === entryId) merge(backfill, refs);
  }
  // The entry's own (stray) run outputs the payload.
  own.get(entryId)!.payload = true;
  return {
    v: STEP_INPUTS_VERSION,
    vertices: Object.fromEntries([...own].map(([id, refs]) => [id, finish(refs, entryId)])),
    backfill: finish(backfill, entryId),
  };
}
