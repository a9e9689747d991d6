// Lets plain node load toolhost-plugin.js for unit tests: the host's
// interface (`toolhost:plugin/host@0.4.0`, provided by the component) is
// replaced by test/host-stub.mjs. Use: node --import ./test/register.mjs --test test/
import { register } from "node:module";

register(
  "data:text/javascript," +
    encodeURIComponent(`
      export async function resolve(specifier, context, next) {
        if (specifier.startsWith("toolhost:plugin/host@")) {
          return { url: ${JSON.stringify(new URL("./host-stub.mjs", import.meta.url).href)}, shortCircuit: true };
        }
        return next(specifier, context);
      }
    `),
);
