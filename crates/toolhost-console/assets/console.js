// The console's live parts: calls as they happen (server-sent events), the
// approvals queue and the saved approvals refreshed from the server when
// they change, and the buttons that answer and revoke. No inline script
// (the page's Content-Security-Policy allows only this file), and every
// value from the server goes in as text, never as markup.
"use strict";

const csrf = document.querySelector('meta[name="csrf"]')?.content ?? "";
const MAX_ROWS = 100;

function time(ms) {
  const d = new Date(Number(ms));
  return isNaN(d) ? "" : d.toLocaleTimeString();
}

function showTimes(root) {
  for (const el of root.querySelectorAll("[data-ms]")) el.textContent = time(el.dataset.ms);
}

async function refresh(name) {
  const old = document.getElementById(name);
  if (!old) return;
  const r = await fetch(`/console/part/${name}`, { credentials: "same-origin" });
  if (r.status === 401) { location.reload(); return; }
  if (!r.ok) return;
  const template = document.createElement("template");
  template.innerHTML = await r.text();
  const fresh = template.content.firstElementChild;
  if (fresh) { showTimes(fresh); old.replaceWith(fresh); }
}

function cell(text, className) {
  const td = document.createElement("td");
  td.textContent = text;
  if (className) td.className = className;
  return td;
}

function addCall(c) {
  const rows = document.getElementById("call-rows");
  if (!rows) return;
  const tr = document.createElement("tr");
  tr.className = "call fresh";
  // Keyed by the runtime's number for the call: ids are the callers' own
  // (every MCP client's are mcp-1, mcp-2…), so two calls may share one.
  tr.dataset.seq = String(c.seq);
  const who = c.client ?? c.agent ?? "local";
  if (c.phase === "started") {
    tr.classList.add("running");
    tr.append(cell(time(c.at_ms), "time"), cell(c.tool, "tool"), cell(who), cell("…"), cell("running", "outcome"), cell(""), cell(""));
  } else {
    tr.dataset.outcome = c.outcome;
    const decision = cell(c.decision ?? "-");
    decision.title = c.rule ?? "";
    const steps = document.createElement("td");
    steps.className = "steps";
    for (const s of c.steps ?? []) {
      const span = document.createElement("span");
      span.className = "step";
      span.textContent = `${s.step} ${s.micros}`;
      span.title = s.note ?? "";
      steps.append(span);
    }
    tr.append(cell(time(c.at_ms), "time"), cell(c.tool, "tool"), cell(who), decision,
      cell(c.outcome + (c.cached ? " (cached)" : ""), "outcome"), cell(String(c.micros), "num"), steps);
  }
  const same = [...rows.querySelectorAll("tr.call")].find((r) => r.dataset.seq === tr.dataset.seq);
  if (same) same.replaceWith(tr); else rows.prepend(tr);
  while (rows.children.length > MAX_ROWS) rows.lastElementChild.remove();
  if (c.phase === "finished" && c.outcome !== "ok") addFailure(c);
}

function addFailure(c) {
  const list = document.querySelector("#failures ul");
  if (!list) return;
  document.querySelector("#failures p.muted")?.remove();
  const li = document.createElement("li");
  const when = document.createElement("span");
  when.className = "time";
  when.textContent = time(c.at_ms);
  const tool = document.createElement("code");
  tool.textContent = c.tool;
  const outcome = document.createElement("strong");
  outcome.textContent = c.outcome;
  li.append(when, " ", tool, ": ", outcome);
  if (c.rule) {
    const rule = document.createElement("span");
    rule.className = "muted";
    rule.textContent = ` (${c.rule})`;
    li.append(rule);
  }
  list.prepend(li);
  while (list.children.length > 50) list.lastElementChild.remove();
}

document.addEventListener("click", async (e) => {
  const button = e.target.closest("button[data-post]");
  if (!button) return;
  button.disabled = true;
  const r = await fetch(button.dataset.post, {
    method: "POST",
    credentials: "same-origin",
    headers: { "X-CSRF-Token": csrf, "Content-Type": "text/plain" },
    body: button.dataset.body ?? "",
  });
  if (!r.ok && r.status !== 409) {
    button.disabled = false;
    alert(await r.text());
  }
  const then = button.dataset.then;
  if (then === "reload") location.reload();
  else if (then) { await refresh(then); if (then === "queue") await refresh("saved"); }
});

showTimes(document);
const events = new EventSource("/console/events");
// An answer "always" is saved by the call it let through, after the
// answer's request has returned: the saved approvals are read again when
// calls finish (half a second after the first that finished, at most
// twice a second), so the page never keeps them from before that save.
let savedSoon = null;
events.addEventListener("calls", (e) => {
  const calls = JSON.parse(e.data);
  for (const c of calls) addCall(c);
  if (savedSoon === null && calls.some((c) => c.phase === "finished")) {
    savedSoon = setTimeout(() => { savedSoon = null; refresh("saved"); }, 500);
  }
});
events.addEventListener("queue", () => refresh("queue"));
events.addEventListener("lagged", () => refresh("calls"));
// Tasks change without a call starting or ending (a status message, a
// question): the part is fetched again every two seconds while shown.
if (document.querySelector('#tasks[data-on="yes"]')) setInterval(() => refresh("tasks"), 2000);
document.documentElement.dataset.live = "connecting";
// A call that failed between the page's rendering and this stream's
// opening is not sent live: the failures are read again once it is open
// (the server reads its feed up before it answers).
events.addEventListener("open", () => {
  document.documentElement.dataset.live = "on";
  refresh("failures");
});
