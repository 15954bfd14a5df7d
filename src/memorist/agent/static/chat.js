// The tutor's chat page: a conversation, the "Long Term Memory" setting (kept in
// localStorage and sent as memoryEnabled with each message), "Helpful" / "Not
// helpful" on the last answer (sent as the outcome of the next message, which the
// tutor's playbook learns from), the memory indicator and the drawer with the
// project's long term memory. Plain browser JavaScript, no
// build step, no dependency; data is written with textContent, never parsed as HTML.
"use strict";

(function () {
  const MEMORY_SETTING = "memorist.chat.memoryEnabled";
  const KEY_STORAGE = "memorist.chat.apiKey";
  const $ = (id) => document.getElementById(id);
  const el = {
    messages: $("messages"), composer: $("composer"), message: $("message"), send: $("send"),
    newConversation: $("new-conversation"), error: $("chat-error"),
    settings: $("settings"), openSettings: $("open-settings"), memoryEnabled: $("memory-enabled"), apiKey: $("api-key"),
    indicator: $("memory-indicator"), drawer: $("memory-drawer"), backdrop: $("drawer-backdrop"), closeDrawer: $("close-drawer"),
    search: $("memory-search"), query: $("memory-query"), clear: $("memory-clear"), status: $("memory-status"),
    list: $("memory-list"), template: $("memory-item"),
    outcome: $("outcome"), outcomeButtons: { success: $("outcome-success"), failure: $("outcome-failure") },
  };
  const state = { conversationId: null, history: [], busy: false, ticket: 0, outcome: null };

  // ------------------------------------------------------------ settings

  function storage(kind) {
    try { return kind === "local" ? window.localStorage : window.sessionStorage; } catch (_) { return null; }
  }
  function memoryEnabled() {
    const s = storage("local");
    return !!s && s.getItem(MEMORY_SETTING) === "true";
  }
  function setMemoryEnabled(on) {
    const s = storage("local");
    if (s) s.setItem(MEMORY_SETTING, on ? "true" : "false");
    showIndicator();
  }
  function apiKey() {
    const s = storage("session");
    return (s && s.getItem(KEY_STORAGE)) || "";
  }
  function showIndicator() {
    const on = memoryEnabled();
    el.memoryEnabled.checked = on;
    el.indicator.hidden = !on;
    if (!on && !el.drawer.hidden) closeDrawer();
  }

  // ------------------------------------------------------------ the API

  async function api(method, path, body) {
    const headers = { Accept: "application/json" };
    const key = apiKey();
    if (key) headers.Authorization = "Bearer " + key;
    if (body !== undefined) headers["Content-Type"] = "application/json";
    let response;
    try {
      response = await fetch(path, { method, headers, cache: "no-store", body: body === undefined ? undefined : JSON.stringify(body) });
    } catch (_) {
      throw new Error("The chat service could not be reached.");
    }
    let data = null;
    try { data = await response.json(); } catch (_) { data = null; }
    if (!response.ok) {
      const err = data && data.error && typeof data.error.message === "string" ? data.error.message : response.statusText;
      throw new Error(err || "The request failed.");
    }
    return data;
  }

  // ------------------------------------------------------------ the conversation

  function addMessage(role, text, note) {
    const li = document.createElement("li");
    li.className = "message " + role;
    const who = document.createElement("span");
    who.className = "visually-hidden";
    who.textContent = role === "user" ? "You: " : "Tutor: ";
    li.appendChild(who);
    li.appendChild(document.createTextNode(text));
    if (note) {
      const small = document.createElement("span");
      small.className = "note";
      small.textContent = note;
      li.appendChild(small);
    }
    el.messages.appendChild(li);
    li.scrollIntoView({ block: "end" });
  }

  // ------------------------------------------------------------ the outcome of the last answer

  function setOutcome(outcome) {
    state.outcome = outcome;
    for (const [name, button] of Object.entries(el.outcomeButtons)) {
      button.setAttribute("aria-pressed", name === outcome ? "true" : "false");
    }
  }
  function toggleOutcome(outcome) {
    setOutcome(state.outcome === outcome ? null : outcome);
  }

  async function send(event) {
    event.preventDefault();
    const text = el.message.value.trim();
    if (!text || state.busy) return;
    state.busy = true;
    el.send.disabled = true;
    el.error.hidden = true;
    addMessage("user", text);
    el.message.value = "";
    const body = {
      message: text,
      conversationHistory: state.history.slice(-20),
      conversationId: state.conversationId,
      memoryEnabled: memoryEnabled(),
    };
    if (state.outcome) body.outcome = state.outcome;
    try {
      const data = await api("POST", "api/ai/chat", body);
      state.conversationId = data.conversationId;
      state.history.push({ role: "user", content: text }, { role: "assistant", content: data.response });
      const memory = data.metadata && data.metadata.memory;
      const note = memory && memory.status === "used" && memory.added && memory.added.length
        ? "Remembered " + memory.added.length + (memory.added.length === 1 ? " thing" : " things") + " about you." : "";
      addMessage("assistant", data.response, note);
      setOutcome(null);
      el.outcome.hidden = false;
      if (!el.drawer.hidden) loadMemories();
    } catch (err) {
      el.error.textContent = err.message;
      el.error.hidden = false;
    } finally {
      state.busy = false;
      el.send.disabled = false;
      el.message.focus();
    }
  }

  function newConversation() {
    state.conversationId = null;
    state.history = [];
    el.messages.replaceChildren();
    setOutcome(null);
    el.outcome.hidden = true;
    el.message.focus();
  }

  // ------------------------------------------------------------ the drawer

  function openDrawer() {
    el.drawer.hidden = false;
    el.backdrop.hidden = false;
    el.indicator.setAttribute("aria-expanded", "true");
    el.closeDrawer.focus();
    loadMemories();
  }
  function closeDrawer() {
    el.drawer.hidden = true;
    el.backdrop.hidden = true;
    el.indicator.setAttribute("aria-expanded", "false");
    if (!el.indicator.hidden) el.indicator.focus();
  }
  function trapFocus(event) {
    if (event.key === "Escape") { event.preventDefault(); closeDrawer(); return; }
    if (event.key !== "Tab") return;
    const focusable = Array.from(el.drawer.querySelectorAll("button, input")).filter((n) => !n.disabled && n.offsetParent !== null);
    if (!focusable.length) return;
    const first = focusable[0], last = focusable[focusable.length - 1];
    if (event.shiftKey && document.activeElement === first) { event.preventDefault(); last.focus(); }
    else if (!event.shiftKey && document.activeElement === last) { event.preventDefault(); first.focus(); }
  }

  function formatTime(iso) {
    const d = new Date(iso);
    return isNaN(d) ? "" : d.toLocaleString();
  }

  async function loadMemories() {
    const ticket = ++state.ticket;
    const q = el.query.value.trim();
    el.status.textContent = "Loading…";
    try {
      const data = await api("GET", "api/ai/memories" + (q ? "?query=" + encodeURIComponent(q) : ""));
      if (ticket !== state.ticket) return;
      render(data.results || [], q);
    } catch (err) {
      if (ticket !== state.ticket) return;
      el.list.replaceChildren();
      el.status.textContent = err.message;
    }
  }

  function render(rows, q) {
    el.list.replaceChildren();
    for (const row of rows) {
      const node = el.template.content.firstElementChild.cloneNode(true);
      node.dataset.id = row.id;
      node.querySelector(".memory-text").textContent = row.memory;
      const time = node.querySelector(".memory-time");
      time.textContent = formatTime(row.created_at);
      time.setAttribute("datetime", row.created_at || "");
      const del = node.querySelector(".delete");
      del.setAttribute("aria-label", "Delete memory: " + row.memory);
      del.addEventListener("click", () => remove(row, node, del));
      el.list.appendChild(node);
    }
    const n = rows.length;
    el.status.textContent = n === 0 ? (q ? "No memory matches." : "No memories yet.")
      : n + (n === 1 ? " memory" : " memories") + (q ? " match." : ", newest first.");
  }

  async function remove(row, node, button) {
    button.disabled = true;
    try {
      await api("DELETE", "api/ai/memories/" + encodeURIComponent(row.id));
      const next = node.nextElementSibling || node.previousElementSibling;
      node.remove();
      el.status.textContent = "Deleted: " + row.memory;
      const target = next ? next.querySelector(".delete") : el.query;
      target.focus();
    } catch (err) {
      button.disabled = false;
      el.status.textContent = err.message;
    }
  }

  // ------------------------------------------------------------ wiring

  el.composer.addEventListener("submit", send);
  el.message.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); el.composer.requestSubmit(); }
  });
  el.newConversation.addEventListener("click", newConversation);
  el.outcomeButtons.success.addEventListener("click", () => toggleOutcome("success"));
  el.outcomeButtons.failure.addEventListener("click", () => toggleOutcome("failure"));
  el.openSettings.addEventListener("click", () => {
    el.memoryEnabled.checked = memoryEnabled();
    el.apiKey.value = apiKey();
    el.settings.showModal();
  });
  el.memoryEnabled.addEventListener("change", () => setMemoryEnabled(el.memoryEnabled.checked));
  el.apiKey.addEventListener("change", () => {
    const s = storage("session");
    if (s) { if (el.apiKey.value.trim()) s.setItem(KEY_STORAGE, el.apiKey.value.trim()); else s.removeItem(KEY_STORAGE); }
  });
  el.settings.addEventListener("close", () => el.openSettings.focus());
  el.indicator.addEventListener("click", openDrawer);
  el.closeDrawer.addEventListener("click", closeDrawer);
  el.backdrop.addEventListener("click", closeDrawer);
  el.drawer.addEventListener("keydown", trapFocus);
  el.search.addEventListener("submit", (e) => { e.preventDefault(); loadMemories(); });
  el.clear.addEventListener("click", () => { el.query.value = ""; loadMemories(); el.query.focus(); });
  window.addEventListener("storage", (e) => { if (e.key === MEMORY_SETTING) showIndicator(); });
  showIndicator();
})();
