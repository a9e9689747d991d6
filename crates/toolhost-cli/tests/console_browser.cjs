// The operator's console in a real browser: Debian's Chromium, driven
// headless over the DevTools protocol by puppeteer-core (both installed by
// `cargo xtask test`). Run by `tests/all/console.rs` against `host serve
// --console`; MCP calls go to the same server with a caller's token, as
// plain JSON-RPC over Streamable HTTP. Prints one JSON report on stdout.
//
// Environment: BASE (http://127.0.0.1:PORT), CALLER and OPERATOR (tokens),
// CHROMIUM (the browser), SCREENSHOT (where to save the page).
"use strict";

const puppeteer = require("puppeteer-core");

const { BASE, CALLER, OPERATOR, CHROMIUM, SCREENSHOT } = process.env;
const report = {};

/// An MCP session of the caller: initialize, then calls.
async function mcpSession() {
  const headers = {
    "Content-Type": "application/json",
    Accept: "application/json, text/event-stream",
    Authorization: `Bearer ${CALLER}`,
  };
  let r = await fetch(`${BASE}/mcp`, {
    method: "POST",
    headers,
    body: JSON.stringify({
      jsonrpc: "2.0", id: 0, method: "initialize",
      params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "console-test", version: "0" } },
    }),
  });
  if (!r.ok) throw new Error(`initialize: ${r.status} ${await r.text()}`);
  const session = r.headers.get("mcp-session-id");
  headers["Mcp-Session-Id"] = session;
  headers["Mcp-Protocol-Version"] = "2025-11-25";
  await fetch(`${BASE}/mcp`, {
    method: "POST", headers,
    body: JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }),
  });
  let id = 1;
  return async (name, args) => {
    const res = await fetch(`${BASE}/mcp`, {
      method: "POST", headers,
      body: JSON.stringify({ jsonrpc: "2.0", id: id++, method: "tools/call", params: { name, arguments: args } }),
    });
    const text = await res.text();
    // A JSON body, or one SSE `data:` line holding the answer.
    const json = text.trim().startsWith("{")
      ? JSON.parse(text)
      : JSON.parse(text.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5)).pop());
    const result = json.result ?? {};
    return { isError: result.isError === true, text: (result.content ?? []).map((c) => c.text).join("") };
  };
}

async function waitPending(page) {
  await page.waitForSelector("#queue article.pending", { timeout: 30000 });
  return page.$eval("#queue article.pending", (el) => el.textContent);
}

// Clicks the element `selector` names as it is now, inside the page: the
// parts the page swaps in from the server (the queue on its events, the
// saved approvals after calls end) may replace it between a lookup from
// here and a click from here.
async function clickNow(page, selector) {
  await page.waitForSelector(selector, { timeout: 30000 });
  await page.$eval(selector, (el) => el.click());
}

async function main() {
  const browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1400,1000"],
    defaultViewport: { width: 1400, height: 1000 },
  });
  try {
    const page = await browser.newPage();
    const errors = [];
    page.on("pageerror", (e) => errors.push(String(e)));
    // Script errors, and anything the page logs as one but the browser's
    // note of a refused sign-in (401) or of the favicon it looks for (404).
    page.on("console", (m) => {
      if (m.type() === "error" && !m.text().startsWith("Failed to load resource")) errors.push(m.text());
    });

    // A caller's token does not open the console.
    await page.goto(`${BASE}/console`);
    report.sign_in_form = (await page.$("form input[name=token]")) !== null;
    await page.type("#token", CALLER);
    await Promise.all([page.waitForNavigation(), page.click("form button[type=submit]")]);
    report.caller_refused = (await page.$("#sign-in-error")) !== null;

    // The operator's does, with an HttpOnly, SameSite=Strict cookie.
    await page.type("#token", OPERATOR);
    await Promise.all([page.waitForNavigation(), page.click("form button[type=submit]")]);
    await page.waitForSelector("#tools");
    report.tools = await page.$$eval('#tools .profile[data-profile=""] li.tool', (els) => els.map((e) => e.dataset.name));
    report.plugins = await page.$$eval("#plugins tr.plugin", (els) => els.map((e) => e.dataset.name));
    const cookie = (await page.cookies()).find((c) => c.name === "toolhost_console");
    report.cookie = cookie ? { httpOnly: cookie.httpOnly, sameSite: cookie.sameSite, path: cookie.path } : null;
    report.cookie_visible_to_script = await page.evaluate(() => document.cookie.includes("toolhost_console"));
    await page.waitForFunction(() => document.documentElement.dataset.live === "on", { timeout: 30000 });

    // A call over MCP shows up live, with no reload of the page. (How soon
    // is reported, `live_call_ms`, never asserted: a loaded CI machine
    // took more than the second this once waited.)
    const call = await mcpSession();
    const counted = await call("word_count", { text: "the console sees this call" });
    const answered = Date.now();
    await page.waitForSelector('#call-rows tr.call[data-outcome="ok"] td.tool', { timeout: 30000 });
    report.live_call_ms = Date.now() - answered;
    report.live_call = await page.$eval('#call-rows tr.call[data-outcome="ok"]', (tr) => ({
      tool: tr.querySelector("td.tool").textContent,
      steps: [...tr.querySelectorAll(".step")].map((s) => s.textContent.split(" ")[0]),
      decision: tr.children[3].textContent,
    }));
    report.word_count = counted;

    // Every client's ids are its own (mcp-1, mcp-2…): two clients' calls
    // with the same id are two rows, not one replacing the other.
    const [a, b] = [await mcpSession(), await mcpSession()];
    await a("word_count", { text: "client a" });
    await b("word_count", { text: "client b" });
    await page.waitForFunction(
      () => [...document.querySelectorAll('#call-rows tr.call[data-outcome="ok"] td.tool')]
        .filter((td) => td.textContent === "word_count").length >= 3,
      { timeout: 30000 },
    ).catch(() => {});
    report.same_id_rows = await page.$$eval('#call-rows tr.call[data-outcome="ok"] td.tool',
      (tds) => tds.filter((td) => td.textContent === "word_count").length);

    // An ask waits in the queue until the operator allows it from the page.
    const waiting = call("calculate", { expression: "2*(3+4)" });
    report.pending_text = await waitPending(page);
    await page.screenshot({ path: SCREENSHOT, fullPage: true });
    await clickNow(page, "#queue article.pending button.allow");
    report.allowed = await waiting;
    await page.waitForFunction(() => document.querySelectorAll("#queue article.pending").length === 0, { timeout: 30000 });

    // "Always" saves an approval for these arguments: the next same call
    // does not wait; the page lists it, and revoking it from the page works.
    const always = call("calculate", { expression: "6*7" });
    await waitPending(page);
    await clickNow(page, "#queue article.pending button.allow-always");
    report.allowed_always = await always;
    await page.waitForSelector("#saved tr.saved", { timeout: 30000 });
    report.saved = await page.$$eval("#saved tr.saved", (els) => els.map((e) => e.textContent));
    report.again_without_asking = await call("calculate", { expression: "6*7" });
    await clickNow(page, "#saved tr.saved button.revoke");
    await page.waitForFunction(() => document.querySelectorAll("#saved tr.saved").length === 0, { timeout: 30000 });
    report.saved_after_revoke = await page.$$eval("#saved tr.saved", (els) => els.length);

    // A denial from the page reaches the caller as one.
    const denied = call("calculate", { expression: "1+1" });
    await waitPending(page);
    await clickNow(page, "#queue article.pending button.deny");
    report.denied = await denied;
    await page.waitForSelector("#failures li", { timeout: 30000 });
    report.failures = await page.$$eval("#failures li", (els) => els.map((e) => e.textContent));

    // A tool name with a bidirectional override (and a long tail) shows
    // escaped and cut, live and after a reload.
    await a("\u202eevil" + "x".repeat(100000), {});
    await page.waitForFunction(() => document.querySelector("#failures")?.textContent.includes("evil"), { timeout: 30000 });
    report.hostile_live = await page.$eval("#failures", (el) => el.textContent);
    await page.reload();
    // The list fills after the page loads, and an earlier failure may be
    // its first line: wait for the hostile one itself (a timeout if the
    // reload lost it).
    await page.waitForFunction(() => document.querySelector("#failures")?.textContent.includes("evil"), { timeout: 30000 });
    report.hostile_reloaded = await page.$eval("#failures", (el) => el.textContent);
    report.hostile_in_page = await page.evaluate(() => document.documentElement.outerHTML.includes("\u202e"));
    report.page_bytes = await page.evaluate(() => document.documentElement.outerHTML.length);

    report.page_errors = errors;
  } finally {
    await browser.close();
  }
}

main().then(
  () => { process.stdout.write(JSON.stringify(report) + "\n"); },
  (e) => {
    process.stdout.write(JSON.stringify({ ...report, error: String(e && e.stack || e) }) + "\n");
    process.exitCode = 1;
  },
);
