// The official TypeScript SDK against a running proxy (tests/test_mcp_clients.py and
// bench/mcp_clients.py run it): argv = mode, /mcp URL; the bearer token in TOOLPROXY_TOKEN.
// Prints one JSON line per event on stdout; reads one line on stdin where it waits for the
// test (a governance decision).
//   list-call  : list tools, call math, report the names and the result
//   task       : call the tool in TOOLPROXY_TASK_TOOL (arguments: TOOLPROXY_TASK_ARGS, JSON)
//                as a task (2025-11-25), wait for "go"
//                on stdin after it is created, then follow it to its result
//   bench N    : N sequential tools/call of math; per-call latencies in ms
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { createInterface } from "node:readline";

const [mode, url, count] = process.argv.slice(2);
const headers = { Authorization: `Bearer ${process.env.TOOLPROXY_TOKEN}` };
const say = (event) => process.stdout.write(JSON.stringify(event) + "\n");
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();

const client = new Client({ name: "toolproxy-ts-test", version: "1.0.0" }, { capabilities: {} });
await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } }));
say({ event: "connected", protocolVersion: client.getServerCapabilities() ? "ok" : "none" });

if (mode === "list-call") {
  const { tools } = await client.listTools();
  say({ event: "tools", names: tools.map((t) => t.name), titles: tools.map((t) => t.title) });
  const result = await client.callTool({ name: "math", arguments: { expr: "2+3*4" } });
  say({ event: "result", result });
} else if (mode === "task") {
  await client.listTools(); // learns which tools take tasks (execution.taskSupport)
  const name = process.env.TOOLPROXY_TASK_TOOL;
  const args = JSON.parse(process.env.TOOLPROXY_TASK_ARGS ?? '{"amount": 2}');
  const stream = client.experimental.tasks.callToolStream({ name, arguments: args });
  for await (const message of stream) {
    if (message.type === "taskCreated") {
      say({ event: "taskCreated", taskId: message.task.taskId, status: message.task.status });
      if (!process.env.TOOLPROXY_TASK_NOWAIT) {
        await lines.next(); // the test decides, then says go
        say({ event: "decided", at: Date.now() });
      } // else it keeps polling on its own while the decision is made

    } else if (message.type === "taskStatus") {
      say({ event: "taskStatus", status: message.task.status, message: message.task.statusMessage });
    } else if (message.type === "result") {
      say({ event: "result", result: message.result, at: Date.now() });
    } else if (message.type === "error") {
      say({ event: "error", message: String(message.error) });
    }
  }
} else if (mode === "bench") {
  const times = [];
  for (let i = 0; i < Number(count); i++) {
    const t0 = performance.now();
    const r = await client.callTool({ name: "math", arguments: { expr: `${i}+1` } });
    times.push(performance.now() - t0);
    if (r.isError) throw new Error(JSON.stringify(r));
  }
  say({ event: "bench", times });
}
await client.close();
process.exit(0);
