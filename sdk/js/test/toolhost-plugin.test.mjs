// Unit tests of the JavaScript helper, run natively with node's test runner
// (the CLI's `languages` tests run them):
//   node --import ./test/register.mjs --test test/
import { test } from "node:test";
import assert from "node:assert/strict";

import { definePlugin, s, Output, Content, InvalidArguments, Failed, Context } from "../toolhost-plugin.js";
import { calls, configValues } from "./host-stub.mjs";

const plugin = definePlugin({
  add: {
    description: "Adds.",
    input: { a: s.integer("A number."), b: s.optional(s.integer({ minimum: 0, default: 1 })) },
    readOnly: true,
    run: ({ a, b = 1 }) => a + b,
  },
  pick: {
    description: "Picks.",
    input: s.object({ mode: s.enum(["x", "y"]), tags: s.optional(s.array(s.string(), { maxItems: 2 })) }),
    output: s.object({ mode: s.string() }),
    run: ({ mode }) => ({ mode }),
  },
  boom: {
    description: "Fails.",
    input: { kind: s.string() },
    run: ({ kind }, cx) => {
      if (kind === "invalid") throw new InvalidArguments("change kind");
      if (kind === "failed") throw new Failed("could not");
      if (kind === "config") return new Output(`${cx.config("greeting")} ${cx.callId}`, { details: { n: 1 } });
      return null.nothing;
    },
  },
});

test("the s helpers build the input schema, with required properties and no others", () => {
  const [add, pick] = plugin.describe();
  assert.equal(add.name, "add");
  assert.deepEqual(add.annotations, { readOnly: true, idempotent: false, destructive: false, openWorld: false });
  assert.deepEqual(JSON.parse(add.inputSchema), {
    type: "object",
    properties: {
      a: { type: "integer", description: "A number." },
      b: { type: "integer", minimum: 0, default: 1 },
    },
    required: ["a"],
    additionalProperties: false,
  });
  assert.equal(add.outputSchema, undefined);
  assert.deepEqual(JSON.parse(pick.outputSchema).required, ["mode"]);
});

test("a call returns text, JSON text, or structured content with an output schema", () => {
  assert.equal(plugin.call("add", '{"a": 2}').output, "3");
  const out = plugin.call("pick", { mode: "x" });
  assert.deepEqual(out.structured, { mode: "x" });
  assert.equal(out.output, '{"mode":"x"}');
});

test("arguments outside the schema are invalid arguments naming the path", () => {
  for (const [tool, args, path] of [
    ["add", { a: "2" }, "arguments.a"],
    ["add", {}, "missing required"],
    ["add", { a: 1, c: 2 }, "unknown property"],
    ["add", { a: 1, b: -1 }, "at least 0"],
    ["pick", { mode: "z" }, "one of"],
    ["pick", { mode: "x", tags: ["a", "b", "c"] }, "at most 2"],
    ["add", "{not json", "not valid JSON"],
  ]) {
    assert.throws(() => plugin.call(tool, args), (e) => e instanceof InvalidArguments && e.message.includes(path), `${tool} ${JSON.stringify(args)}`);
  }
});

test("execute turns errors into the contract's tool-error variants", () => {
  const cx = { callId: "c1", sessionId: undefined, agent: undefined };
  assert.deepEqual(
    (() => { try { plugin.execute(cx, "boom", '{"kind": "invalid"}'); } catch (e) { return e; } })(),
    { tag: "invalid-arguments", val: "change kind" },
  );
  assert.deepEqual(
    (() => { try { plugin.execute(cx, "boom", '{"kind": "failed"}'); } catch (e) { return e; } })(),
    { tag: "failed", val: "could not" },
  );
  const crash = (() => { try { plugin.execute(cx, "boom", '{"kind": "crash"}'); } catch (e) { return e; } })();
  assert.equal(crash.tag, "failed");
  assert.match(crash.val, /TypeError/);
  assert.ok(calls.some(([what, level]) => what === "log" && level === "error"), "the stack goes to the host's log");
  const unknown = (() => { try { plugin.execute(cx, "nothing", "{}"); } catch (e) { return e; } })();
  assert.match(unknown.val, /unknown tool nothing; this plugin provides: add, pick, boom/);
});

test("execute serialises details and reads config through the host", () => {
  configValues.set("greeting", "Hi");
  const out = plugin.execute({ callId: "c7" }, "boom", '{"kind": "config"}');
  assert.deepEqual(out, { output: "Hi c7", details: '{"n":1}', structured: undefined, content: [] });
  new Context().progress("half", 7);
  assert.deepEqual(calls.at(-1), ["progress", "half", 1]);
});

test("bad tools fail when the plugin is defined", () => {
  const run = () => "";
  assert.throws(() => definePlugin({ "no spaces": { description: "x", run } }), /must match/);
  assert.throws(() => definePlugin({ a: { run } }), /description/);
  assert.throws(() => definePlugin({ a: { description: "x", run, input: { type: "string" } } }), /top level/);
  assert.throws(() => definePlugin({ a: { description: "x", run, output: s.string() } }), /output schema/);
  assert.throws(() => definePlugin({}), /no tools/);
});

test("content blocks follow the output text, as the contract's content-block records", () => {
  const png = new Uint8Array([0x89, 0x50, 0x4e, 0x47]);
  const withImage = definePlugin({
    logo: {
      description: "The logo.",
      input: {},
      run: () => new Output("The logo:", { content: [Content.image(png, "image/png", { audience: ["user"] })] }),
    },
  });
  const result = withImage.execute({ callId: "c" }, "logo", "{}");
  assert.equal(result.output, "The logo:");
  assert.deepEqual(result.content, [
    { content: { tag: "text", val: "The logo:" }, annotations: undefined, meta: undefined },
    {
      content: { tag: "image", val: { data: png, mimeType: "image/png" } },
      annotations: { audience: ["user"], priority: undefined, lastModified: undefined },
      meta: undefined,
    },
  ]);
  assert.deepEqual(new Output("plain").content, [], "no blocks: the text alone");
  assert.equal(Content.resourceLink("file:///a", "a", { size: 3 }).val.size, 3n, "u64 as a bigint");
  assert.throws(() => Content.text("x", { audience: ["everyone"] }), TypeError);
});
