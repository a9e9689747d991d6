// Builds one JavaScript plugin into a component with componentize-js (run by
// `cargo xtask plugins-foreign` / `cargo xtask test` with node, from
// target/tools/node):
//   node componentize-js.mjs APP.js WIT OUT.wasm [WORLD]
// (WORLD: `tool-plugin`, the contract's, unless a plain component names its own)
// APP.js may import modules beside it by relative path (the helper module
// ./toolhost-plugin.js): componentize-js resolves them inside APP.js's
// directory when it is given the path (`sourcePath`), not the text.
import { componentize } from "@bytecodealliance/componentize-js";
import { writeFile } from "node:fs/promises";

const [sourcePath, wit, out, world = "tool-plugin"] = process.argv.slice(2);
const { component } = await componentize({
  sourcePath,
  witPath: wit,
  worldName: world,
  // Nothing beyond the contract: the host grants capabilities, not the build.
  disableFeatures: ["random", "stdio", "clocks", "http", "fetch-event"],
});
await writeFile(out, component);
console.error(`built ${out} (${component.length} bytes)`);
