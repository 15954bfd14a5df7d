// The tutor's chat page: a conversation, the "Long Term Memory" setting (kept in
// localStorage and sent as memoryEnabled with each message), "Helpful" / "Not
// helpful" on the last answer (sent as the outcome of the next message, or on its own
// when the conversation ends first; the chat credits it to the playbook bullets that
// answer used), the memory indicator and the drawer with the
// project's long term memory. Plain browser JavaScript, no
// build step, no dependency; data is written with textContent, never parsed as HTML.
"use strict";

(function () {
  const MEMORY_SETTING = "memorist.chat.memoryEnabled";
  const KEY_STORAGE = "memorist.chat.apiKey";
  const PAGE = 100;        // memories per page of the drawer
  const PAGE_MAX = 500;    // the most the drawer lists; search finds the others
  const LABEL_MAX = 60;    // characters of a memory in a delete button's name
  const HISTORY_CHARS = 10000;  // the most the chat takes of one history message
  const $ = (id) => document.getElementById(id);
  const el = {
    messages: $("messages"), composer: $("composer"), message: $("message"), send: $("send"),
    newConversation: $("new-conversation"), error: $("chat-error"),
    settings: $("settings"), openSettings: $("open-settings"), memoryEnabled: $("memory-enabled"), apiKey: $("api-key"),
    indicator: $("memory-indicator"), drawer: $("memory-drawer"), backdrop: $("drawer-backdrop"), closeDrawer: $("close-drawer"),
    search: $("memory-search"), query: $("memory-query"), clear: $("memory-clear"), status: $("memory-status"),
    list: $("memory-list"), more: $("memory-more"), template: $("memory-item"),
    outcome: $("outcome"), outcomeButtons: { success: $("outcome-success"), failure: $("outcome-failure") },
  };
  const state = {
    conversationId: null, history: [], outcome: null,
    busy: false,
    turn: 0,            // the message on its way; a reply to an older one is dropped
    controller: null,   // aborts the message on its way
    ticket: 0,          // the drawer's latest load; an older answer is dropped
    limit: PAGE,        // memories the drawer asks for
    more: false,        // the drawer's list goes on beyond what it shows
    query: "",          // the drawer's search shown ("": the newest first)
  };

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
  function storeKey(key) {
    const s = storage("session");
    if (!s) return;
    if (key) s.setItem(KEY_STORAGE, key); else s.removeItem(KEY_STORAGE);
  }
  // A new key is a new user: their own conversation, and their own memories in the drawer.
  function applyKey() {
    const key = el.apiKey.value.trim();
    if (!storage("session") || key === apiKey()) return;
    sendPendingOutcome();  // the mark is the previous user's, sent with their key
    storeKey(key);
    newConversation();
    state.ticket++;  // a load of the other user's memories, still on its way, is dropped
    state.more = false;
    el.list.replaceChildren();
    el.more.hidden = true;
    el.status.textContent = "";
    if (!el.drawer.hidden) loadMemories();
  }
  function dialogOpen() {
    return el.settings.open || !el.drawer.hidden;
  }
  // ``text`` cut to at most ``max`` UTF-16 units, "…" last, never half a surrogate pair
  // (the chat refuses a lone surrogate).
  function clip(text, max) {
    if (text.length <= max) return text;
    let end = max - 1;
    const last = text.charCodeAt(end - 1);
    if (last >= 0xd800 && last <= 0xdbff) end -= 1;
    return text.slice(0, end) + "…";
  }
  function short(text) {
    text = String(text ?? "");
    return clip(text, LABEL_MAX);
  }
  function showIndicator() {
    const on = memoryEnabled();
    el.memoryEnabled.checked = on;
    el.indicator.hidden = !on;
    if (!on && !el.drawer.hidden) closeDrawer();
  }

  // ------------------------------------------------------------ the API

  class ApiError extends Error {
    constructor(status, message) {
      super(message);
      this.status = status;  // 0: not reached
    }
  }

  async function api(method, path, body, signal) {
    const headers = { Accept: "application/json" };
    const key = apiKey();
    if (key) headers.Authorization = "Bearer " + key;
    if (body !== undefined) headers["Content-Type"] = "application/json";
    let response;
    try {
      response = await fetch(path, { method, headers, cache: "no-store", signal, body: body === undefined ? undefined : JSON.stringify(body) });
    } catch (_) {
      throw new ApiError(0, "The chat service could not be reached.");
    }
    let data = null;
    try { data = await response.json(); } catch (_) { data = null; }
    if (!response.ok) {
      const err = data && data.error && typeof data.error.message === "string" ? data.error.message : response.statusText;
      throw new ApiError(response.status, err || "The request failed.");
    }
    return data;
  }

  // Why a message was not sent, and what to do.
  function notSent(err) {
    const back = " Your message is back in the message box.";
    if (err.status === 401) {
      return apiKey()
        ? "Not sent: the chat refused the API key (" + err.message + "). Set a valid key in Settings, then send again." + back
        : "Not sent: the chat needs an API key. Set it in Settings, then send again." + back;
    }
    const said = String(err.message || "").trim();
    return "Not sent: " + said + (/[.!?)]$/.test(said) ? "" : ".") + back;
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
    return li;
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
  // The mark on the conversation's last answer, sent on its own: the conversation
  // ends (a new one, another key, the page closed) before a next message carries it.
  // Not while a message is on its way: that message carries it.
  function sendPendingOutcome() {
    if (!state.outcome || !state.conversationId || state.busy) return;
    const headers = { "Content-Type": "application/json" };
    const key = apiKey();
    if (key) headers.Authorization = "Bearer " + key;
    const body = JSON.stringify({ conversationId: state.conversationId, outcome: state.outcome });
    state.outcome = null;
    fetch("api/ai/chat/outcome", { method: "POST", headers, body, cache: "no-store", keepalive: true }).catch(() => {});
  }

  async function send(event) {
    event.preventDefault();
    const text = el.message.value.trim();
    if (!text || state.busy) return;
    const turn = ++state.turn;
    const controller = new AbortController();
    state.controller = controller;
    state.busy = true;
    el.send.disabled = true;
    el.error.hidden = true;
    const bubble = addMessage("user", text);
    el.message.value = "";
    const body = {
      message: text,
      conversationHistory: state.history.slice(-20),
      conversationId: state.conversationId,
      memoryEnabled: memoryEnabled(),
    };
    if (state.outcome) body.outcome = state.outcome;
    try {
      const data = await api("POST", "api/ai/chat", body, controller.signal);
      if (turn !== state.turn) return;  // a new conversation began meanwhile
      state.conversationId = data.conversationId;
      // A reply longer than the chat takes back as history goes back shortened, or
      // every later message of the conversation would be refused.
      state.history.push({ role: "user", content: text }, { role: "assistant", content: clip(data.response, HISTORY_CHARS) });
      const memory = data.metadata && data.metadata.memory;
      const saved = memory && (memory.status === "used" || memory.status === "partial") && memory.added ? memory.added.length : 0;
      const note = saved
        ? "Remembered " + saved + (saved === 1 ? " thing" : " things") + " about you"
          + (memory.status === "partial" ? "; the rest of this message could not be saved." : ".") : "";
      addMessage("assistant", data.response, note);
      setOutcome(null);
      el.outcome.hidden = false;
      if (!el.drawer.hidden) loadMemories();
    } catch (err) {
      if (turn !== state.turn) return;
      // Not sent: the view keeps what the history keeps, and the text is not lost
      // (with anything typed since after it).
      bubble.remove();
      const typed = el.message.value.trim();
      el.message.value = typed ? text + "\n\n" + typed : text;
      el.error.textContent = notSent(err);
      el.error.hidden = false;
    } finally {
      if (turn === state.turn) {
        state.busy = false;
        state.controller = null;
        el.send.disabled = false;
        // Not behind an open dialog or drawer: focus stays where the user is.
        if (!dialogOpen()) el.message.focus();
      }
    }
  }

  // A fresh conversation: a reply still on its way is dropped, not shown in it.
  function newConversation() {
    sendPendingOutcome();
    state.turn++;
    if (state.controller) state.controller.abort();
    state.controller = null;
    state.busy = false;
    el.send.disabled = false;
    state.conversationId = null;
    state.history = [];
    el.messages.replaceChildren();
    el.error.hidden = true;
    el.error.textContent = "";
    setOutcome(null);
    el.outcome.hidden = true;
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

  // The newest PAGE memories (or best matches); "Show more" asks for PAGE more, up to PAGE_MAX.
  async function loadMemories({ more = false } = {}) {
    const ticket = ++state.ticket;
    const q = more ? state.query : el.query.value.trim();
    const shown = el.list.children.length;
    state.limit = more ? Math.min(state.limit + PAGE, PAGE_MAX) : PAGE;
    el.status.textContent = "Loading…";
    const params = new URLSearchParams({ limit: String(state.limit) });
    if (q) params.set("query", q);
    try {
      const data = await api("GET", "api/ai/memories?" + params);
      if (ticket !== state.ticket) return;
      state.query = q;
      state.more = !!(data && data.more);
      render((data && data.results) || []);
      if (more) {
        // Focus moves to the first memory the click brought (the button may be gone).
        const first = el.list.children[shown];
        const target = first ? first.querySelector(".delete") : null;
        if (target) target.focus();
      }
    } catch (err) {
      if (ticket !== state.ticket) return;
      el.list.replaceChildren();
      state.more = false;
      el.more.hidden = true;
      el.status.textContent = err.message;
    }
  }

  function plural(n) {
    return n + (n === 1 ? " memory" : " memories");
  }

  // What the drawer shows, counted from its list (so a delete updates it).
  function countText() {
    const n = el.list.querySelectorAll(".memory").length;
    const q = state.query;
    if (!state.more) {
      if (!n) return q ? "No memory matches." : "No memories yet.";
      return plural(n) + (q ? " match." : ", newest first.");
    }
    const rest = state.limit >= PAGE_MAX ? "; search to find the others." : "; there are more.";
    return (q ? "The " + n + " best matches" : "The newest " + plural(n)) + rest;
  }

  function render(rows) {
    el.list.replaceChildren();
    for (const row of rows) {
      const node = el.template.content.firstElementChild.cloneNode(true);
      node.dataset.id = row.id;
      node.querySelector(".memory-text").textContent = row.memory;
      const time = node.querySelector(".memory-time");
      time.textContent = formatTime(row.created_at);
      time.setAttribute("datetime", row.created_at || "");
      const del = node.querySelector(".delete");
      del.setAttribute("aria-label", "Delete memory: " + short(row.memory));
      del.addEventListener("click", () => remove(row, node, del));
      el.list.appendChild(node);
    }
    el.more.hidden = !state.more || state.limit >= PAGE_MAX;
    el.status.textContent = countText();
  }

  async function remove(row, node, button) {
    button.disabled = true;
    try {
      await api("DELETE", "api/ai/memories/" + encodeURIComponent(row.id));
      const next = node.nextElementSibling || node.previousElementSibling;
      node.remove();
      el.status.textContent = "Deleted “" + short(row.memory) + "”. " + countText();
      const target = next ? next.querySelector(".delete") : el.query;
      target.focus();
      if (!next && state.more) loadMemories();  // the page is empty; the rest is not
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
  el.newConversation.addEventListener("click", () => { newConversation(); el.message.focus(); });
  el.outcomeButtons.success.addEventListener("click", () => toggleOutcome("success"));
  el.outcomeButtons.failure.addEventListener("click", () => toggleOutcome("failure"));
  el.openSettings.addEventListener("click", () => {
    el.memoryEnabled.checked = memoryEnabled();
    el.apiKey.value = apiKey();
    el.settings.showModal();
  });
  el.memoryEnabled.addEventListener("change", () => setMemoryEnabled(el.memoryEnabled.checked));
  el.apiKey.addEventListener("change", applyKey);
  $("settings-form").addEventListener("submit", applyKey);  // Done, or Enter in the key field
  el.settings.addEventListener("close", () => el.openSettings.focus());
  el.indicator.addEventListener("click", openDrawer);
  el.closeDrawer.addEventListener("click", closeDrawer);
  el.backdrop.addEventListener("click", closeDrawer);
  el.drawer.addEventListener("keydown", trapFocus);
  el.search.addEventListener("submit", (e) => { e.preventDefault(); loadMemories(); });
  el.more.addEventListener("click", () => loadMemories({ more: true }));
  el.clear.addEventListener("click", () => { el.query.value = ""; loadMemories(); el.query.focus(); });
  window.addEventListener("storage", (e) => { if (e.key === MEMORY_SETTING) showIndicator(); });
  window.addEventListener("pagehide", sendPendingOutcome);
  showIndicator();
})();
