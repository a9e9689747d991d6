// A toolhost tool plugin written in JavaScript, built with componentize-js
// (npm, @bytecodealliance/componentize-js 0.23) against wit/plugin.wit.
// `cargo xtask test` builds it into target/plugins-js/text-case.wasm
// (xtask/componentize-js.mjs).
//
// The `tool` interface: describe() lists the tools; execute() runs one and
// returns a tool-output, or throws a tool-error ({tag, val}).

const readOnly = { readOnly: true, idempotent: true, destructive: false, openWorld: false };

const tools = {
  shout: {
    description: "Upper-cases a text.",
    input: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
    run: (args) => ({ output: args.text.toUpperCase() }),
  },
  json_pick: {
    description: "Picks the value at a dotted path (a.b.c) out of a JSON document.",
    input: {
      type: "object",
      properties: { json: { type: "string" }, path: { type: "string" } },
      required: ["json", "path"],
    },
    output: { type: "object", properties: { found: { type: "boolean" }, value: {} }, required: ["found"] },
    run: (args) => {
      let doc;
      try {
        doc = JSON.parse(args.json);
      } catch (e) {
        throw { tag: "invalid-arguments", val: `json is not valid JSON: ${e.message}` };
      }
      let value = doc;
      for (const key of args.path.split(".")) {
        if (value === null || typeof value !== "object" || !(key in value)) {
          return { output: `nothing at ${args.path}`, structured: { found: false } };
        }
        value = value[key];
      }
      return { output: JSON.stringify(value), structured: { found: true, value } };
    },
  },
};

export const tool = {
  describe() {
    return Object.entries(tools).map(([name, t]) => ({
      name,
      description: t.description,
      inputSchema: JSON.stringify(t.input),
      annotations: readOnly,
      outputSchema: t.output ? JSON.stringify(t.output) : undefined,
    }));
  },
  execute(context, name, argsJson) {
    const t = tools[name];
    if (!t) {
      throw { tag: "invalid-arguments", val: `no tool named ${name}` };
    }
    const r = t.run(JSON.parse(argsJson));
    return {
      output: r.output,
      details: undefined,
      structured: r.structured === undefined ? undefined : JSON.stringify(r.structured),
    };
  },
};
