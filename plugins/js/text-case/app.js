// A toolhost tool plugin written in JavaScript with the helper module
// `sdk/js/toolhost-plugin.js`, built with componentize-js (npm,
// @bytecodealliance/componentize-js 0.23) against wit/plugin.wit.
// `cargo xtask plugins-foreign` (and `cargo xtask test`) copies the helper
// next to this file and builds it into target/plugins-js/text-case.wasm
// (xtask/componentize-js.mjs).

import { definePlugin, s, Output, InvalidArguments } from "./toolhost-plugin.js";

export const tool = definePlugin({
  shout: {
    description: "Upper-cases a text.",
    input: { text: s.string("The text.") },
    readOnly: true,
    idempotent: true,
    run: ({ text }) => text.toUpperCase(),
  },
  json_pick: {
    description: "Picks the value at a dotted path (a.b.c) out of a JSON document.",
    input: {
      json: s.string("The JSON document, as text."),
      path: s.string("Keys separated by dots, e.g. a.b.0"),
    },
    output: s.object({ found: s.boolean(), value: s.optional(s.any()) }),
    readOnly: true,
    idempotent: true,
    run: (args) => {
      let doc;
      try {
        doc = JSON.parse(args.json);
      } catch (e) {
        throw new InvalidArguments(`json is not valid JSON: ${e.message}`);
      }
      let value = doc;
      for (const key of args.path.split(".")) {
        if (value === null || typeof value !== "object" || !Object.hasOwn(value, key)) {
          return new Output(`nothing at ${args.path}`, { structured: { found: false } });
        }
        value = value[key];
      }
      return new Output(JSON.stringify(value), { structured: { found: true, value } });
    },
  },
});
