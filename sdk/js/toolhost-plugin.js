// Write toolhost tool plugins in JavaScript, built with componentize-js.
//
// One ES module, no dependencies. Copy it next to your `app.js` (componentize-js
// resolves relative imports inside the plugin's directory) and write:
//
//   import { definePlugin, s, Output, InvalidArguments } from "./toolhost-plugin.js";
//
//   export const tool = definePlugin({
//     shout: {
//       description: "Upper-cases a text.",
//       input: { text: s.string("The text.") },
//       readOnly: true,
//       idempotent: true,
//       run: ({ text }) => text.toUpperCase(),
//     },
//   });
//
// `export const tool` is the component's `tool` export (wit/plugin.wit,
// toolhost:plugin@0.4.0). What the helper gives, as the Rust SDK does:
//
// - `input`: the arguments' JSON Schema, built with the `s` helpers
//   (`s.string`, `s.integer`, `s.number`, `s.boolean`, `s.array`,
//   `s.object`, `s.enum`, `s.optional`, `s.any`) or written by hand; a plain
//   object of properties is shorthand for `s.object(...)` (every property
//   required unless wrapped in `s.optional`).
// - `output`: the structured result's schema (optional, `"type": "object"`).
// - `run(args, cx)` returns a string (the text for the model), an `Output`
//   (text plus `details` for user interfaces, `structured` content and
//   `content` blocks: `Content.image(pngBytes, "image/png")`, audio,
//   resource links, embedded resources; an MCP client receives the text
//   then the blocks, a model that reads images sees the images), or any
//   other value: with an `output` schema it is the structured content, and
//   its JSON text the output.
// - `throw new InvalidArguments("...")` when the model should change its
//   arguments, `throw new Failed("...")` when the tool could not do its job;
//   any other exception becomes `Failed` (its stack goes to the host's log).
// - `cx`: `callId`, `sessionId`, `agent`, and the host's `log(level, msg)`,
//   `config(key)`, `configKeys()`, `progress(msg, fraction)`.
//
// Everything is checked when the module is evaluated, which componentize-js
// does once at build time (the snapshot holds it): a bad tool fails the build.
// The helper also checks every call's arguments against the schema (the
// host has done so already; this is the second line).

import * as host from "toolhost:plugin/host@0.4.0";

const NAME = /^[a-zA-Z0-9_-]{1,64}$/;
const LEVELS = ["trace", "debug", "info", "warn", "error"];
const OPTIONAL = Symbol("toolhost.optional");

/** The model should change its arguments; the message says how. */
export class InvalidArguments extends Error {
  constructor(message) {
    super(message);
    this.name = "InvalidArguments";
  }
}

/** The tool ran and could not do its job. */
export class Failed extends Error {
  constructor(message) {
    super(message);
    this.name = "Failed";
  }
}

/** A tool's result: text for the model, optional `details` (any JSON value,
 * for user interfaces; the model never sees it) and `structured` content. */
/**
 * One content block of a result, as in MCP (contract 0.3.0): make one with
 * `Content.text`, `Content.image`, `Content.audio`, `Content.resourceLink`,
 * `Content.embeddedText` or `Content.embeddedBlob`. The last argument of
 * each takes `{ audience: ["user" | "assistant"], priority: 0..1,
 * lastModified: "ISO 8601", meta: {...} }` (all optional).
 */
export class Content {
  constructor(tag, val, { audience, priority, lastModified, meta } = {}) {
    this.tag = tag;
    this.val = val;
    this.audience = [...(audience ?? [])];
    for (const a of this.audience) {
      if (a !== "user" && a !== "assistant") throw new TypeError(`audience ${show(a)} is not "user" or "assistant"`);
    }
    this.priority = priority === undefined ? undefined : Number(priority);
    this.lastModified = lastModified;
    if (meta !== undefined && (meta === null || typeof meta !== "object" || Array.isArray(meta))) {
      throw new TypeError("meta must be an object (MCP's _meta)");
    }
    this.meta = meta;
  }
  static text(text, options) {
    return new Content("text", String(text), options);
  }
  /** An image: its bytes (a Uint8Array) and MIME type (models read PNG, JPEG, GIF, WebP). */
  static image(data, mimeType, options) {
    return new Content("image", { data: bytes(data), mimeType: String(mimeType) }, options);
  }
  static audio(data, mimeType, options) {
    return new Content("audio", { data: bytes(data), mimeType: String(mimeType) }, options);
  }
  static resourceLink(uri, name, { title, description, mimeType, size, ...options } = {}) {
    const val = { uri: String(uri), name: String(name), title, description, mimeType, size: size === undefined ? undefined : BigInt(size) };
    return new Content("resource-link", val, options);
  }
  static embeddedText(uri, text, { mimeType, ...options } = {}) {
    return new Content("embedded", { uri: String(uri), mimeType, body: { tag: "text", val: String(text) } }, options);
  }
  static embeddedBlob(uri, data, { mimeType, ...options } = {}) {
    return new Content("embedded", { uri: String(uri), mimeType, body: { tag: "blob", val: bytes(data) } }, options);
  }
  /** The block as the contract's `content-block`. */
  toBlock() {
    const annotated = this.audience.length > 0 || this.priority !== undefined || this.lastModified !== undefined;
    return {
      content: { tag: this.tag, val: this.val },
      annotations: annotated ? { audience: this.audience, priority: this.priority, lastModified: this.lastModified } : undefined,
      meta: this.meta === undefined ? undefined : JSON.stringify(this.meta),
    };
  }
}

function bytes(data) {
  if (data instanceof Uint8Array) return data;
  if (data instanceof ArrayBuffer || Array.isArray(data)) return new Uint8Array(data);
  throw new TypeError("binary data must be a Uint8Array, an ArrayBuffer or an array of bytes");
}

/**
 * A tool's result: text for the model, and optional `details` (for user
 * interfaces), `structured` content and `content` blocks (an array of
 * `Content`: the result as an MCP client receives it is then the text, unless
 * empty, followed by these).
 */
export class Output {
  constructor(output, { details, structured, content } = {}) {
    this.output = String(output);
    this.details = details;
    this.structured = structured;
    const blocks = [...(content ?? [])];
    for (const b of blocks) {
      if (!(b instanceof Content)) throw new TypeError("content holds Content blocks");
    }
    if (blocks.length > 0 && this.output !== "") blocks.unshift(Content.text(this.output));
    this.content = blocks;
  }
}

/** Writes to the host's log (trace, debug, info, warn, error). */
export function log(level, message) {
  host.log(LEVELS.includes(level) ? level : "info", String(message));
}

/** A configuration value (manifest `[config]`, overridden by the host's), or undefined. */
export function config(key) {
  const value = host.getConfig(String(key));
  return value === null ? undefined : value;
}

/** Every configuration key the plugin has a value for. */
export function configKeys() {
  return host.configKeys();
}

/** Reports progress of a long call to the user interface (never the model). */
export function progress(message, fraction) {
  let f;
  if (typeof fraction === "number" && !Number.isNaN(fraction)) {
    f = Math.min(1, Math.max(0, fraction));
  }
  host.progress(String(message), f);
}

/** The call's context, handed to every `run`. */
export class Context {
  constructor(callId = "test", sessionId, agent) {
    this.callId = callId;
    this.sessionId = sessionId ?? undefined;
    this.agent = agent ?? undefined;
  }
  log(level, message) {
    log(level, message);
  }
  config(key) {
    return config(key);
  }
  configKeys() {
    return configKeys();
  }
  progress(message, fraction) {
    progress(message, fraction);
  }
}

// ------------------------------------------------------------ schemas

/** `opts` as an object: a string is a description. */
function options(opts) {
  if (opts === undefined) return {};
  return typeof opts === "string" ? { description: opts } : { ...opts };
}

/** Small builders of JSON Schema. Each takes a description or an object of
 * extra keywords (`{ description, minimum, maxLength, default, ... }`). */
export const s = {
  string: (opts) => ({ type: "string", ...options(opts) }),
  integer: (opts) => ({ type: "integer", ...options(opts) }),
  number: (opts) => ({ type: "number", ...options(opts) }),
  boolean: (opts) => ({ type: "boolean", ...options(opts) }),
  any: (opts) => ({ ...options(opts) }),
  enum: (values, opts) => ({ enum: [...values], ...options(opts) }),
  array: (items, opts) => ({ type: "array", items, ...options(opts) }),
  /** An object; every property is required unless wrapped in `s.optional`.
   * Unknown properties are refused unless `additionalProperties` is given. */
  object: (properties, opts) => {
    const props = {};
    const required = [];
    for (const [key, schema] of Object.entries(properties)) {
      if (schema === null || typeof schema !== "object") {
        throw new TypeError(`property ${key}: a schema must be an object`);
      }
      const { [OPTIONAL]: optional, ...plain } = schema;
      props[key] = plain;
      if (!optional) required.push(key);
    }
    return { type: "object", properties: props, required, additionalProperties: false, ...options(opts) };
  },
  /** Marks a property of `s.object` as not required. */
  optional: (schema) => ({ ...schema, [OPTIONAL]: true }),
};

const typeOf = (v) =>
  v === null ? "null" : Array.isArray(v) ? "array" : Number.isInteger(v) ? "integer" : typeof v;

const show = (v) => {
  const text = JSON.stringify(v) ?? String(v);
  return text.length <= 60 ? text : `${text.slice(0, 57)}...`;
};

/** Checks `value` against the subset of JSON Schema the `s` helpers write
 * (type, enum, properties, required, additionalProperties, items, anyOf,
 * minimum/maximum, minLength/maxLength, minItems/maxItems); throws
 * InvalidArguments naming the path. Other keywords are left to the host. */
export function check(schema, value, path = "arguments") {
  if (schema.type !== undefined) {
    const types = Array.isArray(schema.type) ? schema.type : [schema.type];
    const t = typeOf(value);
    const ok = types.some((want) => want === t || (want === "number" && t === "integer"));
    if (!ok) throw new InvalidArguments(`${path}: expected ${types.join(" or ")}, got ${show(value)}`);
  }
  if (schema.enum !== undefined && !schema.enum.some((e) => e === value)) {
    throw new InvalidArguments(`${path}: must be one of ${show(schema.enum)}, not ${show(value)}`);
  }
  if (schema.anyOf !== undefined) {
    const ok = schema.anyOf.some((alt) => {
      try {
        check(alt, value, path);
        return true;
      } catch (e) {
        if (e instanceof InvalidArguments) return false;
        throw e;
      }
    });
    if (!ok) throw new InvalidArguments(`${path}: ${show(value)} matches none of the allowed schemas`);
  }
  if (typeof value === "number") {
    if (schema.minimum !== undefined && value < schema.minimum)
      throw new InvalidArguments(`${path}: must be at least ${schema.minimum}`);
    if (schema.maximum !== undefined && value > schema.maximum)
      throw new InvalidArguments(`${path}: must be at most ${schema.maximum}`);
  }
  if (typeof value === "string") {
    const length = [...value].length;
    if (schema.minLength !== undefined && length < schema.minLength)
      throw new InvalidArguments(`${path}: must be at least ${schema.minLength} characters`);
    if (schema.maxLength !== undefined && length > schema.maxLength)
      throw new InvalidArguments(`${path}: must be at most ${schema.maxLength} characters`);
  }
  if (Array.isArray(value)) {
    if (schema.minItems !== undefined && value.length < schema.minItems)
      throw new InvalidArguments(`${path}: needs at least ${schema.minItems} items`);
    if (schema.maxItems !== undefined && value.length > schema.maxItems)
      throw new InvalidArguments(`${path}: takes at most ${schema.maxItems} items`);
    if (schema.items !== undefined) value.forEach((v, i) => check(schema.items, v, `${path}[${i}]`));
  }
  if (typeOf(value) === "object") {
    for (const key of schema.required ?? []) {
      if (!Object.hasOwn(value, key)) throw new InvalidArguments(`${path}: missing required property ${show(key)}`);
    }
    const props = schema.properties ?? {};
    for (const [key, v] of Object.entries(value)) {
      if (Object.hasOwn(props, key)) {
        check(props[key], v, `${path}.${key}`);
      } else if (schema.additionalProperties === false) {
        throw new InvalidArguments(`${path}: unknown property ${show(key)}`);
      } else if (typeof schema.additionalProperties === "object") {
        check(schema.additionalProperties, v, `${path}.${key}`);
      }
    }
  }
}

// ------------------------------------------------------------ tools

/** A tool's input as a schema: a schema with `"type": "object"` as it is,
 * a plain object of properties through `s.object`. */
function inputSchema(name, input) {
  if (input === undefined) return s.object({});
  if (input === null || typeof input !== "object") {
    throw new TypeError(`tool ${name}: input must be a schema or an object of properties`);
  }
  if (input.type === "object") return input;
  if (typeof input.type === "string") {
    throw new TypeError(`tool ${name}: the input schema's top level must be "type": "object"`);
  }
  return s.object(input);
}

function json(value, what) {
  const text = JSON.stringify(value);
  if (text === undefined) throw new Failed(`${what} is not JSON`);
  return text;
}

/**
 * Builds the component's `tool` export from an object of tools:
 * `{ NAME: { description, input, output?, readOnly?, idempotent?,
 * destructive?, openWorld?, run(args, cx) } }`. Throws (at build time) on a
 * bad name, a missing description or a schema whose top level is not an
 * object.
 *
 * The returned object also has `call(name, args, cx?)`, which runs a tool as
 * the host would (for unit tests): it returns the `Output` or throws
 * InvalidArguments / Failed.
 */
export function definePlugin(tools) {
  const table = new Map();
  for (const [name, t] of Object.entries(tools)) {
    if (!NAME.test(name)) throw new TypeError(`tool name ${show(name)} must match ^[a-zA-Z0-9_-]{1,64}$`);
    if (typeof t.description !== "string" || t.description.trim() === "") {
      throw new TypeError(`tool ${name}: give it a description`);
    }
    if (typeof t.run !== "function") throw new TypeError(`tool ${name}: run must be a function`);
    const input = inputSchema(name, t.input);
    if (t.output !== undefined && (t.output === null || t.output.type !== "object")) {
      throw new TypeError(`tool ${name}: an output schema's top level must be "type": "object"`);
    }
    table.set(name, {
      run: t.run,
      input,
      output: t.output,
      spec: {
        name,
        description: t.description,
        inputSchema: JSON.stringify(input),
        annotations: {
          readOnly: Boolean(t.readOnly),
          idempotent: Boolean(t.idempotent),
          destructive: Boolean(t.destructive),
          openWorld: Boolean(t.openWorld),
        },
        outputSchema: t.output === undefined ? undefined : JSON.stringify(t.output),
      },
    });
  }
  if (table.size === 0) throw new TypeError("the plugin has no tools");

  function call(name, args, cx = new Context()) {
    const t = table.get(name);
    if (t === undefined) throw new Failed(`unknown tool ${name}; this plugin provides: ${[...table.keys()].join(", ")}`);
    if (typeof args === "string") {
      try {
        args = JSON.parse(args);
      } catch (e) {
        throw new InvalidArguments(`the arguments are not valid JSON: ${e.message}`);
      }
    }
    check(t.input, args);
    let result;
    try {
      result = t.run(args, cx);
    } catch (e) {
      if (e instanceof InvalidArguments || e instanceof Failed) throw e;
      if (e instanceof RangeError && /recursion/i.test(e.message)) throw new Failed(`the tool ${name} recursed too deeply`);
      try {
        log("error", `${name}: ${e?.stack ?? e}`);
      } catch {
        // No host (unit tests): the error is enough.
      }
      throw new Failed(`${e?.name ?? "Error"}: ${e?.message ?? String(e)}`);
    }
    let out;
    if (result instanceof Output) out = result;
    else if (typeof result === "string") out = new Output(result);
    else if (t.output !== undefined) out = new Output(json(result, "the result"), { structured: result });
    else out = new Output(json(result, "the result"));
    if (t.output !== undefined && out.structured === undefined) {
      throw new Failed(`the tool ${name} declares an output schema but returned no structured content`);
    }
    return out;
  }

  return {
    describe() {
      return [...table.values()].map((t) => t.spec);
    },
    execute(context, name, argsJson) {
      const cx = new Context(context.callId, context.sessionId, context.agent);
      try {
        const out = call(name, argsJson, cx);
        return {
          output: out.output,
          details: out.details === undefined ? undefined : json(out.details, "details"),
          structured: out.structured === undefined ? undefined : json(out.structured, "structured content"),
          content: out.content.map((b) => b.toBlock()),
        };
      } catch (e) {
        if (e instanceof InvalidArguments) throw { tag: "invalid-arguments", val: e.message };
        throw { tag: "failed", val: e instanceof Failed ? e.message : String(e) };
      }
    },
    call,
  };
}
