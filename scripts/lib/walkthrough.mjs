/**
 * docs/walkthrough.md as e2e stories (scripts/e2e.mjs): its `sh` blocks, in page order, run in one
 * bash session per run (a variable a block sets — `EXEC`, `REFUND` — reaches the later blocks), with
 * the page's ports, tokens, secrets and /tmp files rewritten to the e2e's. So the page cannot drift
 * from the engine: a command that stops working, or an answer that stops saying what the page says,
 * fails the story of its section.
 *
 * The page steers the run with HTML comments (invisible on GitHub), each on its own line:
 *
 *   <!-- e2e: skip (why) -->   before a block: not run (section 0's `npm start`).
 *   <!-- e2e: wait -->         before a block: the page says to wait there ("a few seconds later",
 *                              section 5's tick, section 7's two-second webhook). The block — a read,
 *                              never a write — is run again every second until its expectations hold,
 *                              within `waitMs`; the failure says how often it ran and what it printed last.
 *   <!-- e2e: expect TEXT -->  after a block: its output (stdout and stderr) must contain TEXT.
 *
 * Nothing else is retried. A block fails when bash exits non-zero, when curl cannot connect, or when
 * an expectation is missing from its output.
 */
import { spawn } from "node:child_process";
import { readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";

/** The walkthrough's own values, as the page writes them (npm start's ports, tokens and secrets). */
export const PAGE = {
  engine: "localhost:8787",
  demo: "localhost:8788",
  webhookSecret: "whsec_local_demo",
  /** demo/wrangler.toml's PAYMENTS_WEBHOOK_SECRET without its `whsec_` prefix (section 7 signs with it). */
  paymentsSigningKey: "aWRlbWZsb3ctbG9jYWwtZGVtby1wYXltZW50cy1rZXk=",
};

const MARKER = /^<!--\s*e2e:\s*(skip|wait|expect)\b\s*(.*?)\s*-->\s*$/;

/**
 * The page's sections (`## N. title`) with their blocks, in order: `[{ number, title, blocks: [{ code,
 * line, skip, wait, expects }] }]`. `###` subsections belong to their `##` section.
 */
export function parseWalkthrough(markdown) {
  const sections = [];
  const lines = markdown.split("\n");
  let section = null;
  let pending = { skip: false, wait: false };
  let last = null;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    const heading = /^## (\d+)\. (.+)$/.exec(line);
    if (heading) {
      section = { number: Number(heading[1]), title: heading[2].trim(), blocks: [] };
      sections.push(section);
      pending = { skip: false, wait: false };
      last = null;
      continue;
    }
    if (/^## /.test(line)) {
      section = null;
      continue;
    }
    const marker = MARKER.exec(line.trim());
    if (marker) {
      if (!section) throw new Error(`docs/walkthrough.md:${i + 1}: an e2e comment outside a numbered section`);
      if (marker[1] === "expect") {
        if (!last) throw new Error(`docs/walkthrough.md:${i + 1}: "e2e: expect" with no sh block before it in its section`);
        if (!marker[2]) throw new Error(`docs/walkthrough.md:${i + 1}: "e2e: expect" without a text`);
        last.expects.push(marker[2]);
      } else pending[marker[1]] = true;
      continue;
    }
    if (line === "```sh" && section) {
      const start = i + 1;
      const code = [];
      for (i++; i < lines.length && lines[i] !== "```"; i++) code.push(lines[i]);
      last = { code: code.join("\n"), line: start, ...pending, expects: [] };
      section.blocks.push(last);
      pending = { skip: false, wait: false };
    }
  }
  return sections;
}

/** The block's code with the page's ports, tokens, secrets and /tmp paths replaced by the run's. */
export function rewriteBlock(code, { enginePort, demoPort, webhookSecret, paymentsWebhookSecret, tmpDir }) {
  return code
    .replaceAll(`http://${PAGE.engine}`, `http://127.0.0.1:${enginePort}`)
    .replaceAll(PAGE.engine, `127.0.0.1:${enginePort}`)
    .replaceAll(PAGE.demo, `localhost:${demoPort}`)
    .replaceAll(PAGE.webhookSecret, webhookSecret)
    .replaceAll(PAGE.paymentsSigningKey, paymentsWebhookSecret.replace(/^whsec_/, ""))
    .replaceAll("/tmp/", `${tmpDir}/`);
}

/** Every shell variable the page's blocks assign (`EXEC=…`, `TS=$(…)`): they are carried from block to block. */
export function assignedVariables(sections) {
  const names = new Set();
  for (const block of sections.flatMap((s) => s.blocks)) {
    for (const m of block.code.matchAll(/(?:^|[\s;(])([A-Z][A-Z0-9_]*)=/g)) names.add(m[1]);
  }
  return [...names];
}

/**
 * A runner for one walkthrough: `runSection(section, { signal, log })` runs the section's blocks in
 * order in bash (cwd `root`), carrying the variables in a state file under `tmpDir`.
 */
export function walkthroughRunner({ root, tmpDir, variables, rewrite, blockMs = 120_000, waitMs = 90_000 }) {
  const stateFile = join(tmpDir, "walkthrough-state.sh");
  const declare = variables.length > 0 ? `declare -p ${variables.join(" ")} > '${stateFile}' 2>/dev/null` : ":";

  async function runBash(code, signal) {
    const script = [`[ -f '${stateFile}' ] && . '${stateFile}'`, code, "__rc=$?", declare, "exit $__rc"].join("\n");
    const scriptFile = join(tmpDir, "walkthrough-block.sh");
    await writeFile(scriptFile, script);
    const child = spawn("bash", [scriptFile], {
      cwd: root,
      stdio: ["ignore", "pipe", "pipe"],
      signal: AbortSignal.any([signal, AbortSignal.timeout(blockMs)].filter(Boolean)),
    });
    const chunks = [];
    child.stdout.on("data", (c) => chunks.push(c));
    child.stderr.on("data", (c) => chunks.push(c));
    const code_ = await new Promise((resolveRun) => {
      child.on("error", (error) => resolveRun(error.name === "AbortError" ? "aborted" : error.message));
      child.on("close", (rc) => resolveRun(rc));
    });
    return { rc: code_, output: Buffer.concat(chunks).toString("utf8") };
  }

  const missing = (output, expects) => expects.filter((text) => !output.includes(text));
  const shown = (output) => (output.length > 1500 ? `${output.slice(0, 700)}\n…\n${output.slice(-700)}` : output).trim();

  async function runBlock(block, signal) {
    const code = rewrite(block.code);
    const deadline = Date.now() + waitMs;
    for (let runs = 1; ; runs++) {
      const { rc, output } = await runBash(code, signal);
      const where = `docs/walkthrough.md:${block.line}`;
      if (rc !== 0) throw new Error(`${where}: the block exited with ${rc}:\n${code}\n--- it printed:\n${shown(output)}`);
      if (/curl: \(\d+\)/.test(output)) throw new Error(`${where}: curl failed:\n${code}\n--- it printed:\n${shown(output)}`);
      const absent = missing(output, block.expects);
      if (absent.length === 0) return output;
      if (!block.wait || Date.now() >= deadline) {
        throw new Error(
          `${where}: the output lacks ${absent.map((t) => JSON.stringify(t)).join(", ")}` +
            (block.wait ? ` (waited ${Math.round(waitMs / 1000)} s: ran ${runs} times)` : "") +
            `:\n${code}\n--- it printed:\n${shown(output)}`,
        );
      }
      await sleep(1_000, undefined, { signal });
    }
  }

  return {
    async runSection(section, { signal } = {}) {
      for (const block of section.blocks) if (!block.skip) await runBlock(block, signal);
    },
    cleanup: () => rm(stateFile, { force: true }),
  };
}

/** The page, parsed: the sections that have something to run. */
export async function loadWalkthrough(root) {
  const sections = parseWalkthrough(await readFile(join(root, "docs", "walkthrough.md"), "utf8"));
  return { sections: sections.filter((s) => s.blocks.some((b) => !b.skip)), variables: assignedVariables(sections) };
}
