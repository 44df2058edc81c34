#!/usr/bin/env node
// The typed client as a user installs it (`npm run client:example`, part of `npm test`, offline):
//   1. `npm pack` clients/typescript into a scratch directory outside the repo, with its dependency
//      openapi-fetch (and that one's openapi-typescript-helpers) packed from the repo's node_modules;
//   2. `npm install --offline` the three tarballs into a fresh ESM project there;
//   3. `node` (this one and the machine's own) runs a program that imports "@idemflow/client" and lists workflows against a local
//      server here (GET /v1/workflows, a bearer token), then reads a 401 as problem+json;
//   4. `tsc --strict` type-checks the same calls in TypeScript, under NodeNext and Bundler resolution.
import { createServer } from "node:http";
import { mkdtemp, mkdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { fileURLToPath } from "node:url";

const run = promisify(execFile);
const root = fileURLToPath(new URL("..", import.meta.url));
const tsc = join(root, "node_modules/typescript/bin/tsc");
const scratch = await mkdtemp(join(tmpdir(), "idemflow-client-"));
const app = join(scratch, "app");
const keep = process.argv.includes("--keep");

const npm = async (args, cwd) => {
  const env = { ...process.env, npm_config_audit: "false", npm_config_fund: "false", npm_config_update_notifier: "false" };
  return (await run("npm", args, { cwd, env })).stdout;
};

// The program a user writes, and its server: one page of workflows for the right token, a 401 problem otherwise.
const program = `import { idemflowClient } from "@idemflow/client";

const baseUrl = process.argv[2];
const idemflow = idemflowClient({ baseUrl, token: "dev-token" });
const { data, error } = await idemflow.GET("/v1/workflows", { params: { query: { limit: 10 } } });
if (error) throw new Error(\`\${error.code}: \${error.detail ?? error.title}\`);
for (const workflow of data.items) console.log(\`workflow \${workflow.workflowId} v\${workflow.latestVersion}\`);

const wrong = await idemflowClient({ baseUrl, token: "wrong" }).GET("/v1/workflows");
console.log(\`problem \${wrong.response.status} \${wrong.error?.code}\`);
`;
const typed = `import { idemflowClient, newIdempotencyKey, type components } from "@idemflow/client";

type WorkflowList = components["schemas"]["WorkflowList"];

export async function names(baseUrl: string): Promise<string[]> {
  const idemflow = idemflowClient({ baseUrl, token: "dev-token" });
  const { data, error } = await idemflow.GET("/v1/workflows", { params: { query: { limit: 10 } } });
  if (error) throw new Error(\`\${error.code}: \${error.detail ?? error.title}\`);
  const list: WorkflowList = data;
  await idemflow.POST("/v1/events", {
    headers: { "Idempotency-Key": newIdempotencyKey() },
    body: { name: "payment.confirmed", match: "A-1001" },
  });
  return list.items.map((workflow) => workflow.workflowId);
}
`;
const server = createServer((request, response) => {
  const url = new URL(request.url ?? "/", "http://localhost");
  if (request.method === "GET" && url.pathname === "/v1/workflows" && request.headers.authorization === "Bearer dev-token") {
    response.writeHead(200, { "content-type": "application/json" });
    const items = [{ workflowId: "hello", latestVersion: "3", schedule: null, updatedAt: "2026-12-01T03:00:00Z" }];
    response.end(JSON.stringify({ items, next: null }));
    return;
  }
  response.writeHead(401, { "content-type": "application/problem+json" });
  response.end(
    JSON.stringify({
      type: "urn:idemflow:problem:unauthorized",
      code: "unauthorized",
      title: "Unauthorized",
      status: 401,
      detail: "unknown token",
    }),
  );
});

try {
  const packed = JSON.parse(
    await npm(
      [
        "pack",
        "--json",
        "--ignore-scripts",
        "--pack-destination",
        scratch,
        join(root, "clients/typescript"),
        join(root, "node_modules/openapi-fetch"),
        join(root, "node_modules/openapi-typescript-helpers"),
      ],
      root,
    ),
  );
  const tarballs = packed.map((p) => join(scratch, p.filename));
  const shipped = packed[0].files.map((f) => f.path).sort();
  const expectedFiles = ["README.md", "index.d.ts", "index.js", "openapi.json", "package.json", "schema.d.ts"];
  if (shipped.join() !== expectedFiles.join()) throw new Error(`the tarball holds ${shipped.join(", ")}, not ${expectedFiles.join(", ")}`);
  console.error(`packed ${packed[0].id}: ${shipped.join(", ")}`);

  await mkdir(app);
  await writeFile(join(app, "package.json"), `${JSON.stringify({ name: "scratch", private: true, type: "module" }, null, 2)}\n`);
  await npm(["install", "--offline", "--ignore-scripts", "--no-package-lock", ...tarballs], app);
  const installed = JSON.parse(await readFile(join(app, "node_modules/@idemflow/client/package.json"), "utf8"));
  if (installed.dependencies?.["openapi-fetch"] === undefined) throw new Error("the installed client does not depend on openapi-fetch");

  await writeFile(join(app, "main.mjs"), program);
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address();
  // The Node running this script (under `npm run`, the repo's pinned `node` devDependency) and the machine's own `node`
  // (PATH without any node_modules/.bin): the user's Node is the latter.
  const machinePath = process.env.PATH.split(delimiter)
    .filter((dir) => !dir.includes("node_modules"))
    .join(delimiter);
  const nodes = [
    { command: process.execPath, env: process.env },
    { command: "node", env: { ...process.env, PATH: machinePath } },
  ];
  const expected = "workflow hello v3\nproblem 401 unauthorized\n";
  const versions = new Set();
  for (const { command, env } of nodes) {
    const version = (await run(command, ["--version"], { env }).catch(() => ({ stdout: "" }))).stdout.trim();
    if (version === "" || versions.has(version)) continue;
    versions.add(version);
    const { stdout } = await run(command, ["main.mjs", `http://127.0.0.1:${port}`], { cwd: app, env });
    if (stdout !== expected) throw new Error(`node ${version} main.mjs printed ${JSON.stringify(stdout)}, not ${JSON.stringify(expected)}`);
    console.error(`node ${version} ran the installed client:\n${stdout.trimEnd()}`);
  }
  await writeFile(join(app, "typed.ts"), typed);
  for (const moduleResolution of ["NodeNext", "Bundler"]) {
    const compilerOptions = {
      ...{ module: moduleResolution === "NodeNext" ? "NodeNext" : "ESNext", moduleResolution, target: "ES2022", lib: ["ES2022", "DOM"] },
      ...{ types: [], strict: true, noEmit: true, skipLibCheck: false },
    };
    await writeFile(join(app, "tsconfig.json"), JSON.stringify({ compilerOptions, files: ["typed.ts"] }));
    await run(process.execPath, [tsc, "-p", "tsconfig.json"], { cwd: app }).catch((failure) => {
      throw new Error(`tsc (${moduleResolution}) rejected the installed client's types:\n${failure.stdout}${failure.stderr}`);
    });
  }
  console.error("tsc --strict type-checks it under NodeNext and Bundler resolution");
} catch (failure) {
  console.error(`client:example: ${failure.message}${failure.stderr ? `\n${failure.stderr}` : ""}`);
  process.exitCode = 1;
} finally {
  server.close();
  if (keep) console.error(`kept ${scratch}`);
  else await rm(scratch, { recursive: true, force: true });
}
