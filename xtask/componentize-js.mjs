// Builds one JavaScript plugin into a component with componentize-js (run by
// `cargo xtask test` with node, from target/tools/node):
//   node componentize-js.mjs APP.js WIT OUT.wasm
import { componentize } from "@bytecodealliance/componentize-js";
import { readFile, writeFile } from "node:fs/promises";

const [source, wit, out] = process.argv.slice(2);
const { component } = await componentize(await readFile(source, "utf8"), {
  witPath: wit,
  worldName: "tool-plugin",
  // Nothing beyond the contract: the host grants capabilities, not the build.
  disableFeatures: ["random", "stdio", "clocks", "http", "fetch-event"],
});
await writeFile(out, component);
console.error(`built ${out} (${component.length} bytes)`);
