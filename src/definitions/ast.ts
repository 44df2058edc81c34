/**
 * A loose view of JSONata's compiled AST (`expression.ast()`), enough to walk it. JSONata's own
 * typings describe the parser's nodes only partly, and the checks here must survive unknown node
 * kinds, so children are found generically: every object-valued member that has a string `type`.
 */
export interface AstNode {
  type: string;
  value?: unknown;
  position?: number;
  [member: string]: unknown;
}

export function isNode(value: unknown): value is AstNode {
  return value !== null && typeof value === "object" && !Array.isArray(value) && typeof (value as { type?: unknown }).type === "string";
}

/** Members that never hold sub-expressions (or that would be visited twice). */
const NOT_CHILDREN = new Set([
  "type",
  "value",
  "position",
  "signature",
  "slot",
  "tuple",
  "ancestor",
  "seekingParent",
  "focus",
  "index",
  "label",
]);

/** The direct child nodes of `node`, with the member they sit in (nested arrays are flattened). */
export function childrenOf(node: AstNode): Array<{ member: string; child: AstNode }> {
  const out: Array<{ member: string; child: AstNode }> = [];
  const collect = (member: string, value: unknown) => {
    if (isNode(value)) out.push({ member, child: value });
    else if (Array.isArray(value)) for (const item of value) collect(member, item);
    else if (value !== null && typeof value === "object" && !(value instanceof RegExp)) {
      // Wrappers such as filter stages ({ type, expr }) are nodes; sort terms ({ expression }) are not.
      for (const inner of Object.values(value)) collect(member, inner);
    }
  };
  for (const [member, value] of Object.entries(node)) {
    if (NOT_CHILDREN.has(member)) continue;
    collect(member, value);
  }
  return out;
}

/** Every node of the tree, depth first. */
export function* allNodes(root: AstNode): Generator<AstNode> {
  const stack: AstNode[] = [root];
  const seen = new Set<AstNode>();
  while (stack.length > 0) {
    const node = stack.pop()!;
    if (seen.has(node)) continue;
    seen.add(node);
    yield node;
    for (const { child } of childrenOf(node)) stack.push(child);
  }
}
