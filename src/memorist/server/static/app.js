// The memory panel: one project's memories, newest first, over Memorist's REST API.
// Plain browser JavaScript, no build step, no dependency. Every piece of data is
// written as text (textContent, text nodes, setAttribute), never parsed as HTML.
"use strict";

(function () {
  const KEY_STORAGE = "memorist.apiKey";
  const PAGE = 100;          // memories per page of the list
  const SEARCH_LIMIT = 20;   // results of a search
  const CHIP_MAX = 80;       // characters of a metadata value shown in a chip
  const USERS_MAX = 1000;    // projects in the picker; beyond, they are opened by their id
  const OPTION_MAX = 60;     // characters of a user id shown in the picker (the full id in its title)

  const $ = (id) => document.getElementById(id);
  const el = {
    keyForm: $("key-form"), key: $("api-key"), forgetKey: $("forget-key"), keyState: $("key-state"),
    projectForm: $("project-form"), project: $("project"), projectState: $("project-state"),
    manual: $("project-manual"),
    searchForm: $("search-form"), query: $("query"), clearSearch: $("clear-search"),
    heading: $("memories-heading"), status: $("status"), list: $("memory-list"), more: $("more"),
    error: $("error"), errorMessage: $("error-message"), retry: $("retry"), enterKey: $("enter-key"),
    dialog: $("confirm"), dialogMemory: $("confirm-memory"), dialogError: $("confirm-error"),
    dialogCancel: $("confirm-cancel"), dialogDelete: $("confirm-delete"),
    template: $("memory-item"),
  };

  const state = {
    user: "",          // the project (user id) shown
    query: "",         // the search shown ("" = the newest-first list)
    limit: PAGE,
    ticket: 0,         // the latest load; an older answer arriving late is dropped
    usersTicket: 0,    // the same for the list of projects
    lastLoad: null,    // what Retry repeats
    pending: null,     // {item, button} of the delete being confirmed
  };

  // ---------------------------------------------------------------- the API

  class ApiError extends Error {
    constructor(status, type, message, field) {
      super(message);
      this.status = status;
      this.type = type;
      this.field = field || null;
    }
  }

  // The key in use: kept in the tab's storage, and here, so that it still works for
  // the page's life where the browser refuses storage.
  let keptKey = "";

  function apiKey() {
    try {
      return sessionStorage.getItem(KEY_STORAGE) || keptKey;
    } catch (_) {
      return keptKey;  // storage disabled: the key lasts until the page is left
    }
  }

  async function api(method, path, body) {
    const headers = { Accept: "application/json" };
    const key = apiKey();
    const bad = key ? badKeyMessage(key) : "";
    // Not the "could not be reached" of a failed fetch: the request was never sent.
    if (bad) throw new ApiError(0, "bad_key", bad);
    if (key) headers.Authorization = "Bearer " + key;
    if (body !== undefined) headers["Content-Type"] = "application/json";
    let response;
    try {
      response = await fetch(path, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        cache: "no-store",
      });
    } catch (_) {
      throw new ApiError(0, "network", "The memory service could not be reached.");
    }
    let data = null;
    try {
      data = await response.json();
    } catch (_) {
      data = null;
    }
    if (!response.ok) {
      // The service's errors are {"error": {"type", "message", "field"}}.
      const err = data && typeof data === "object" && data.error && typeof data.error === "object" ? data.error : {};
      const message = typeof err.message === "string" && err.message
        ? err.message
        : response.statusText || "The request failed.";
      // A 429's wait, unless the service's message says it already ("…; retry in 1 s").
      const wait = response.status === 429 ? Number(response.headers.get("Retry-After")) : NaN;
      const said = /\b(retry|try again)\b/i.test(message);
      const hint = Number.isFinite(wait) && wait > 0 && !said ? ` Try again in ${Math.ceil(wait)} s.` : "";
      throw new ApiError(response.status, String(err.type || "http"), message + hint, err.field);
    }
    return data;
  }

  const enc = encodeURIComponent;

  // ---------------------------------------------------------------- text

  // At most `max` characters (code points), with "…" when cut.
  function shorten(text, max) {
    const chars = Array.from(text);
    return chars.length > max ? chars.slice(0, max - 1).join("") + "…" : text;
  }

  // A user's text (an id, a query, a message quoting one) inside the panel's own
  // sentence: in a <bdi>, so a right-to-left id or a direction control in it takes its
  // own direction and cannot reorder the words around it.
  function bdi(text) {
    const node = document.createElement("bdi");
    node.textContent = text;
    return node;
  }

  // Right-to-left letters or direction controls: text that needs isolating where no
  // element can do it (an <option>'s label).
  const BIDI = /[\u0590-\u08FF\uFB1D-\uFDFF\uFE70-\uFEFC\u061C\u200E\u200F\u202A-\u202E\u2066-\u2069\u{10800}-\u{10FFF}\u{1E800}-\u{1EFFF}]/u;

  function isolated(text) {
    return BIDI.test(text) ? "\u2068" + text + "\u2069" : text;
  }

  // The service's message, with the field it names ("user_id: string should have at
  // most 256 characters"): a 422's message leaves the field out.
  function errorText(err) {
    const message = String(err.message || "");
    return err.field && !message.startsWith(`${err.field}:`) ? `${err.field}: ${message}` : message;
  }

  // What an HTTP header can carry of a key: printable ASCII (keys are "ek_" and
  // URL-safe base64). Fetch refuses anything else before sending the request.
  const NOT_IN_HEADER = /[^\x20-\x7E]/u;
  // Characters that copying a key picks up and that no key holds: zero-width spaces
  // and joiners, the byte-order mark.
  const INVISIBLE = /[\u200B-\u200D\u2060\uFEFF]/g;

  function badKeyMessage(key) {
    const match = NOT_IN_HEADER.exec(key);
    if (!match) return "";
    const code = "U+" + match[0].codePointAt(0).toString(16).toUpperCase().padStart(4, "0");
    const shown = /^[\p{L}\p{N}\p{P}\p{S}]$/u.test(match[0]) ? `“${match[0]}” (${code})` : code;
    return `The API key holds ${shown}, a character an HTTP header cannot carry: copy the key again.`;
  }

  // ---------------------------------------------------------------- states

  // The status line: the panel's words as strings, a user's text as <bdi> nodes.
  function announce(...parts) {
    el.status.replaceChildren(...parts);
  }

  function isKeyError(err) {
    return err.status === 401 || err.type === "bad_key";
  }

  function showError(err, what) {
    // "Show more" had the focus: it goes to Retry, not to the page's start.
    const hadFocus = el.more.contains(document.activeElement);
    el.list.replaceChildren();
    el.more.hidden = true;
    el.more.removeAttribute("aria-disabled");
    el.list.removeAttribute("aria-busy");
    const where = err.status ? ` (HTTP ${err.status})` : "";
    const message = bdi(errorText(err));
    let parts = [`${what}: `, message, where];
    el.enterKey.hidden = !isKeyError(err);
    if (err.type === "bad_key") {
      keyRefused(err);
    } else if (err.status === 401) {
      // With a key set, the service refused that key: say so, not that one is missing.
      parts = apiKey()
        ? ["The service refused the API key: ", message, where]
        : ["This service needs an API key. ", message, where];
      keyRefused(err);
    }
    el.errorMessage.replaceChildren(...parts);
    el.error.hidden = false;
    announce("");
    if (hadFocus) el.retry.focus();
  }

  // The key field is marked invalid, and says why, when the service refuses the key
  // (or asks for one), or the key cannot be sent at all.
  function keyRefused(err) {
    el.key.setAttribute("aria-invalid", "true");
    el.enterKey.textContent = apiKey() ? "Change the API key" : "Enter an API key";
    if (err.type === "bad_key") el.keyState.textContent = errorText(err);
    else if (apiKey()) el.keyState.replaceChildren("The service refused this key: ", bdi(errorText(err)));
  }

  function keyAccepted() {
    if (el.key.getAttribute("aria-invalid") !== "true") return;
    el.key.removeAttribute("aria-invalid");
    el.keyState.textContent = keyStateText();
  }

  function clearError() {
    el.error.hidden = true;
    el.errorMessage.textContent = "";
    el.enterKey.hidden = true;
  }

  function setHeading() {
    if (!state.user) el.heading.textContent = "Memories";
    else if (state.query) el.heading.replaceChildren("Search results for “", bdi(state.query), "” in ", bdi(state.user));
    else el.heading.replaceChildren("Memories of ", bdi(state.user), ", newest first");
  }

  function noMatch() {
    return ["No memories match “", bdi(state.query), "”."];
  }

  // ---------------------------------------------------------------- rendering

  function formatDate(iso) {
    const date = new Date(iso);
    if (Number.isNaN(date.getTime())) return String(iso);
    return date.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" });
  }

  function setTime(node, iso) {
    node.dateTime = iso;
    node.title = iso;
    node.textContent = formatDate(iso);
  }

  function chipValue(value) {
    return shorten(typeof value === "string" ? value : JSON.stringify(value), CHIP_MAX);
  }

  function addChip(list, key, value, kind) {
    const group = document.createElement("div");
    group.className = kind ? `chip chip-${kind}` : "chip";
    // Each takes its own direction (an Arabic key, a Hebrew value).
    const dt = document.createElement("dt");
    dt.dir = "auto";
    dt.textContent = key;
    const dd = document.createElement("dd");
    dd.dir = "auto";
    const full = typeof value === "string" ? value : JSON.stringify(value);
    dd.textContent = chipValue(value);
    if (full !== dd.textContent) dd.title = full;
    group.append(dt, dd);
    list.append(group);
  }

  function renderItem(item) {
    const li = el.template.content.firstElementChild.cloneNode(true);
    li.dataset.id = String(item.id);
    const text = String(item.memory ?? "");
    li.querySelector(".text").textContent = text;
    const created = item.created_at ? String(item.created_at) : "";
    const updated = item.updated_at ? String(item.updated_at) : "";
    if (created) setTime(li.querySelector(".created"), created);
    if (updated && updated !== created) {
      setTime(li.querySelector(".updated"), updated);
      li.querySelector(".updated-wrap").hidden = false;
    }
    const chips = li.querySelector(".chips");
    for (const field of ["agent_id", "run_id"]) {
      if (item[field]) addChip(chips, field.replace("_id", ""), item[field], "scope");
    }
    const meta = item.metadata && typeof item.metadata === "object" ? item.metadata : {};
    for (const [key, value] of Object.entries(meta)) addChip(chips, key, value);
    if (!chips.children.length) chips.remove();
    else chips.setAttribute("aria-label", "Metadata");
    const del = li.querySelector(".delete");
    const short = shorten(text, 60);
    del.setAttribute("aria-label", `Delete memory: ${short}`);
    del.addEventListener("click", () => askDelete(li, del, text));
    return li;
  }

  // emptyText: a string, or the parts of a sentence (strings and <bdi> nodes).
  function render(results, emptyText) {
    el.list.replaceChildren(...results.map(renderItem));
    el.list.removeAttribute("aria-busy");
    if (!results.length) {
      const li = document.createElement("li");
      li.className = "empty";
      li.append(...[].concat(emptyText));
      el.list.append(li);
    }
  }

  // ---------------------------------------------------------------- loading

  // more: the next page of the list, asked with "Show more", which stays where it is
  // (aria-disabled while loading) so that it keeps the keyboard focus.
  async function load(kind, { more = false } = {}) {
    state.lastLoad = kind;
    const ticket = ++state.ticket;
    clearError();
    setHeading();
    if (!state.user) {
      el.list.replaceChildren();
      el.more.hidden = true;
      el.more.removeAttribute("aria-disabled");
      announce("Choose a project to see its memories.");
      return;
    }
    const shown = el.list.querySelectorAll(".memory").length;
    el.list.setAttribute("aria-busy", "true");
    if (more) el.more.setAttribute("aria-disabled", "true");
    else {
      el.more.hidden = true;
      el.more.removeAttribute("aria-disabled");
    }
    announce(kind === "search" ? "Searching…" : "Loading memories…");
    try {
      let data;
      if (kind === "search") {
        data = await api("POST", "api/memories/search/", { query: state.query, user_id: state.user, limit: SEARCH_LIMIT });
      } else {
        // The user id goes in the query, never the path: any id ("school/alice", "..",
        // "search") reaches the service as it is.
        data = await api("GET", `api/memories/?user_id=${enc(state.user)}&limit=${state.limit}`);
      }
      if (ticket !== state.ticket) return;
      const results = Array.isArray(data && data.results) ? data.results : [];
      if (kind === "search") {
        render(results, noMatch());
        if (results.length) announce(`${count(results.length)} found for “`, bdi(state.query), "”.");
        else announce(...noMatch());
      } else {
        const hadFocus = el.more.contains(document.activeElement);
        render(results, "No memories for this project yet");
        el.more.removeAttribute("aria-disabled");
        el.more.hidden = results.length < state.limit;
        announce(results.length ? `${count(results.length)}, newest first.` : "No memories for this project yet.");
        // The button went away under the focus: the focus goes to the first memory
        // just loaded (or the last one, when none came).
        if (hadFocus && el.more.hidden) focusAfterMore(shown);
      }
      keyAccepted();
    } catch (err) {
      if (ticket !== state.ticket) return;
      showError(err, kind === "search" ? "Search failed" : "Could not load the memories");
    }
  }

  function focusAfterMore(shown) {
    const items = el.list.querySelectorAll(".memory");
    const target = items[shown] || items[items.length - 1];
    const button = target && target.querySelector(".delete");
    if (button) button.focus();
    else el.heading.focus();
  }

  function count(n) {
    return n === 1 ? "1 memory" : `${n} memories`;
  }

  async function loadUsers() {
    const ticket = ++state.usersTicket;
    el.projectState.textContent = "";
    let users = [];
    try {
      // One more than the picker shows: that one says the list goes on.
      const data = await api("GET", `api/users/?limit=${USERS_MAX + 1}`);
      users = Array.isArray(data && data.results) ? data.results : [];
    } catch (err) {
      if (ticket !== state.usersTicket) return;
      fillPicker([]);
      const message = bdi(errorText(err));
      if (err.type === "bad_key") {
        keyRefused(err);
        el.projectState.replaceChildren("Could not list the projects (", message, "); enter the key again.");
      } else if (err.status === 401 && apiKey()) {
        keyRefused(err);
        el.projectState.replaceChildren("The service refused the API key (", message, "); enter another key to list the projects.");
      } else if (err.status === 401) {
        el.projectState.textContent = "Enter an API key to list the projects, or open a user id.";
      } else {
        el.projectState.replaceChildren("Could not list the projects (", message, "); open a user id instead.");
      }
      return;
    }
    if (ticket !== state.usersTicket) return;
    keyAccepted();
    const truncated = users.length > USERS_MAX;
    if (truncated) users = users.slice(0, USERS_MAX);
    fillPicker(users);
    if (!users.length) el.projectState.textContent = "No projects yet; open a user id to look at one.";
    else if (truncated) {
      el.projectState.textContent = `The first ${USERS_MAX.toLocaleString("en")} projects by id are listed; there are more: open one by its user id below.`;
    }
    if (!state.user && users.length) {
      openUser(String(users[0].user_id), { focus: false });
    }
  }

  // A project's option: a long id cut short (the full id in its title), isolated from
  // the count after it when it holds right-to-left text or direction controls.
  function projectOption(id, memories) {
    const short = shorten(id, OPTION_MAX);
    const n = Number(memories);
    const label = Number.isFinite(n) ? `${isolated(short)} (${count(n)})` : isolated(short);
    const option = new Option(label, id);
    option.dir = "auto";
    if (short !== id) option.title = id;
    return option;
  }

  function fillPicker(users) {
    const options = [];
    const placeholder = new Option(users.length ? "Choose a project…" : "No projects listed", "");
    options.push(placeholder);
    const seen = new Set();
    for (const u of users) {
      const id = String(u.user_id ?? "");
      if (!id || seen.has(id)) continue;
      seen.add(id);
      options.push(projectOption(id, u.memories));
    }
    if (state.user && !seen.has(state.user)) options.push(projectOption(state.user));
    el.project.replaceChildren(...options);
    el.project.value = state.user;
  }

  function openUser(user, { focus } = { focus: false }) {
    state.user = user;
    state.query = "";
    state.limit = PAGE;
    el.query.value = "";
    if (user && ![...el.project.options].some((o) => o.value === user)) {
      el.project.append(projectOption(user));
    }
    el.project.value = user;
    const hash = user ? "#user=" + enc(user) : "";
    if (location.hash !== hash) history.replaceState(null, "", hash || location.pathname);
    load("list");
    if (focus) el.heading.focus();
  }

  function userFromHash() {
    const match = /^#user=(.*)$/.exec(location.hash);
    if (!match) return "";
    try {
      return decodeURIComponent(match[1]);
    } catch (_) {
      return "";
    }
  }

  // ---------------------------------------------------------------- delete

  function askDelete(item, button, text) {
    state.pending = { item, button };
    el.dialogMemory.textContent = text;
    el.dialogMemory.scrollTop = 0;
    el.dialogError.textContent = "";
    el.dialogDelete.disabled = false;
    el.dialog.showModal();
    // A long memory scrolls inside its quote (the question and the buttons stay in
    // view): the quote is then reachable by keyboard to scroll it.
    if (el.dialogMemory.scrollHeight > el.dialogMemory.clientHeight) el.dialogMemory.tabIndex = 0;
    else el.dialogMemory.removeAttribute("tabindex");
    el.dialogCancel.focus();
  }

  function closeDialog() {
    if (el.dialog.open) el.dialog.close();
  }

  // While a delete is on its way the dialog stays until the answer is in.
  el.dialog.addEventListener("cancel", (event) => {
    if (el.dialogDelete.disabled) event.preventDefault();
  });

  el.dialog.addEventListener("close", () => {
    // The event comes a moment after the dialog closed: if it was opened again
    // meanwhile (Escape, then Enter at once), the new ask is the pending one.
    if (el.dialog.open) return;
    const pending = state.pending;
    state.pending = null;
    if (pending && pending.button.isConnected) pending.button.focus();
  });

  el.dialogCancel.addEventListener("click", () => {
    announce("Nothing deleted.");
    closeDialog();
  });

  el.dialogDelete.addEventListener("click", async () => {
    const pending = state.pending;
    if (!pending) return closeDialog();
    const id = pending.item.dataset.id;
    el.dialogDelete.disabled = true;
    el.dialogError.textContent = "";
    try {
      // The memory id is the service's own (UUID-shaped), safe in the path; the user
      // id, any text, goes in the query.
      await api("DELETE", `api/memories/${enc(id)}/?user_id=${enc(state.user)}`);
    } catch (err) {
      el.dialogDelete.disabled = false;
      const where = err.status ? ` (HTTP ${err.status})` : "";
      el.dialogError.replaceChildren("Could not delete: ", bdi(errorText(err)), where);
      if (err.type === "bad_key") keyRefused(err);
      return;
    }
    // Focus goes to the next memory's delete button, or the previous one's, or the heading.
    const neighbour = pending.item.nextElementSibling || pending.item.previousElementSibling;
    pending.item.remove();
    state.pending = null;
    closeDialog();
    const next = neighbour && neighbour.querySelector(".delete");
    if (next) next.focus();
    else el.heading.focus();
    if (!el.list.querySelector(".memory")) {
      render([], state.query ? noMatch() : "No memories for this project yet");
    }
    announce("Memory deleted.");
    loadUsers();  // the picker's counts
  });

  // ---------------------------------------------------------------- wiring

  function keyStateText() {
    return apiKey()
      ? "A key is set for this tab; it is sent as Authorization: Bearer."
      : "No key: fine for a local development server.";
  }

  function showKeyState() {
    el.key.value = apiKey();
    el.keyState.textContent = keyStateText();
  }

  el.keyForm.addEventListener("submit", (event) => {
    event.preventDefault();
    const key = el.key.value.replace(INVISIBLE, "").trim();
    const bad = badKeyMessage(key);
    if (bad) {
      // Not used: fetch could not send it, and the service would never see it.
      el.key.setAttribute("aria-invalid", "true");
      el.keyState.textContent = apiKey() ? `${bad} The key set before is still in use.` : bad;
      announce("The key was not used: it holds a character an HTTP header cannot carry.");
      el.key.focus();
      return;
    }
    keptKey = key;
    try {
      if (key) sessionStorage.setItem(KEY_STORAGE, key);
      else sessionStorage.removeItem(KEY_STORAGE);
    } catch (_) {
      /* storage disabled: the key lasts until the page is left */
    }
    el.key.removeAttribute("aria-invalid");
    showKeyState();
    announce(key ? "Key saved for this tab." : "Key removed.");
    loadUsers();
    if (state.user) load(state.query ? "search" : "list");
  });

  el.forgetKey.addEventListener("click", () => {
    keptKey = "";
    try {
      sessionStorage.removeItem(KEY_STORAGE);
    } catch (_) {
      /* nothing stored */
    }
    el.key.removeAttribute("aria-invalid");
    showKeyState();
    announce("Key forgotten.");
    loadUsers();
    if (state.user) load(state.query ? "search" : "list");
  });

  el.project.addEventListener("change", () => {
    if (el.project.value) openUser(el.project.value);
  });

  el.projectForm.addEventListener("submit", (event) => {
    event.preventDefault();
    const user = el.manual.value.trim();
    if (!user) {
      el.manual.focus();
      announce("Type a user id to open it.");
      return;
    }
    el.manual.value = "";
    openUser(user, { focus: true });
  });

  el.searchForm.addEventListener("submit", (event) => {
    event.preventDefault();
    const query = el.query.value.trim();
    if (!state.user) {
      announce("Choose a project before searching.");
      el.project.focus();
      return;
    }
    state.query = query;
    load(query ? "search" : "list");
  });

  function clearSearch() {
    el.query.value = "";
    if (state.query) {
      state.query = "";
      load("list");
    }
    el.query.focus();
  }

  el.clearSearch.addEventListener("click", clearSearch);
  el.query.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && (el.query.value || state.query)) {
      event.preventDefault();
      clearSearch();
    }
  });

  el.retry.addEventListener("click", () => {
    if (state.lastLoad) load(state.lastLoad);
    loadUsers();
  });

  el.enterKey.addEventListener("click", () => el.key.focus());

  el.more.addEventListener("click", () => {
    if (el.more.getAttribute("aria-disabled") === "true") return;  // the page is loading
    state.limit += PAGE;
    load("list", { more: true });
  });

  window.addEventListener("hashchange", () => {
    const user = userFromHash();
    if (user && user !== state.user) openUser(user);
  });

  showKeyState();
  const initial = userFromHash();
  if (initial) openUser(initial);
  else load("list");
  loadUsers();
})();
