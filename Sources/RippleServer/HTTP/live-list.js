// Ripple Sync's live list: one subscription over the sync protocol (protocol 1), shown as a
// table that follows every Postgres transaction. Each changeset is applied to the DOM itself:
// deleted rows are removed, inserted rows created, moved rows moved (the same node), and only
// the changed cells of updated rows rewritten. A snapshot is the only time the list is rebuilt.
// The socket reconnects by itself and resumes from the subscription's basis and position.
// Plain JavaScript, no build step, nothing downloaded.
"use strict";

(() => {
  const $ = (id) => document.getElementById(id);
  const body = $("list").tBodies[0];
  const headRow = $("list").tHead.rows[0];

  // The one subscription: its query, and what a resume presents (basis, lsn).
  let subscription = null;   // { id, query, basis, lsn, columns, types, key, rows: [tr], started }
  let token = "";
  let socket = null;
  let attempt = 0;           // failed connections in a row (backoff)
  let stopped = true;        // no reconnecting (not started, or a refusal that a retry cannot fix)
  let lastHeard = 0;
  let frames = 0;
  let position = null;
  let reconnectTimer = null;
  let counter = 0;
  const waiters = [];

  // MARK: Status and problems

  function setStatus(state, text) {
    $("status").dataset.state = state;
    $("status").textContent = text;
  }

  function showProblem(text) {
    $("problem").hidden = !text;
    $("problem").textContent = text || "";
  }

  function summarize() {
    const rows = subscription ? subscription.rows.length : 0;
    $("summary").textContent = subscription && subscription.started
      ? `${rows} row${rows === 1 ? "" : "s"} · at ${subscription.lsn} · ${frames} frame${frames === 1 ? "" : "s"}`
      : "";
    $("empty").hidden = !(subscription && subscription.started && rows === 0);
  }

  function settle() {
    summarize();
    for (const waiter of waiters.slice()) waiter();
  }

  // MARK: Values

  function cell(value) {
    const td = document.createElement("td");
    write(td, value);
    return td;
  }

  function write(td, value) {
    td.classList.toggle("null", value === null);
    td.textContent = value === null ? "" : typeof value === "string" ? value : String(value);
  }

  function rowElement(values) {
    const tr = document.createElement("tr");
    tr.rippleValues = values.slice();
    for (const value of values) tr.appendChild(cell(value));
    return tr;
  }

  function flash(element, name) {
    element.classList.remove(name);
    void element.offsetWidth;   // restart the animation
    element.classList.add(name);
  }

  // MARK: Snapshots and changesets

  function showSnapshot(snapshot) {
    subscription.basis = snapshot.basis;
    subscription.columns = snapshot.columns;
    subscription.types = snapshot.types;
    subscription.key = snapshot.key;
    headRow.replaceChildren(...snapshot.columns.map((name, index) => {
      const th = document.createElement("th");
      th.textContent = name;
      th.title = snapshot.types[index];
      if (snapshot.key.includes(index)) th.classList.add("key");
      return th;
    }));
    subscription.rows = snapshot.rows.map(rowElement);
    body.replaceChildren(...subscription.rows);
  }

  class Misfit extends Error {}

  // The protocol's algorithm ("Applying a changeset"), on the row elements. Everything is
  // checked before the DOM is touched: a changeset that does not fit changes nothing.
  function applyChangeset(changeset) {
    const old = subscription.rows;
    const deletes = changeset.deletes || [], inserts = changeset.inserts || [];
    const moves = changeset.moves || [], updates = changeset.updates || [];
    const count = old.length - deletes.length + inserts.length;
    if (count < 0) throw new Misfit("more deletes than rows");
    const placed = new Array(count).fill(null);
    const taken = new Array(old.length).fill(false);
    const index = (value, limit) => {
      if (!Number.isInteger(value) || value < 0 || value >= limit) throw new Misfit(`index ${value} out of range`);
      return value;
    };
    const take = (o) => {
      if (taken[index(o, old.length)]) throw new Misfit(`old row ${o} taken twice`);
      taken[o] = true;
    };
    const place = (n, element) => {
      if (placed[index(n, count)]) throw new Misfit(`place ${n} filled twice`);
      placed[n] = element;
    };
    for (const o of deletes) take(o);
    const arriving = [];   // [place, element], inserted or moved
    for (const [n, values] of inserts) {
      if (!Array.isArray(values) || values.length !== subscription.columns.length) throw new Misfit("an inserted row of another width");
      const element = rowElement(values);
      place(n, element);
      arriving.push([n, element, "inserted"]);
    }
    for (const [o, n] of moves) {
      take(o);
      place(n, old[o]);
      arriving.push([n, old[o], "moved"]);
    }
    let next = 0;
    for (let o = 0; o < old.length; o++) {
      if (taken[o]) continue;
      while (next < count && placed[next]) next++;
      if (next === count) throw new Misfit("a kept row finds no place");
      placed[next++] = old[o];
    }
    if (placed.includes(null)) throw new Misfit("a place stays empty");
    const rewrites = [];
    for (const [, n, columns] of updates) {
      index(n, count);
      for (const [column, value] of Object.entries(columns)) {
        rewrites.push([placed[n], index(Number(column), subscription.columns.length), value]);
      }
    }

    // The DOM: out go the deleted and the moved rows; the kept rows are then in their new
    // relative order, and the arriving ones go in at their places, in ascending order.
    for (const o of deletes) old[o].remove();
    for (const [o] of moves) old[o].remove();
    arriving.sort((a, b) => a[0] - b[0]);
    for (const [n, element, kind] of arriving) {
      body.insertBefore(element, body.children[n] || null);
      flash(element, kind);
    }
    for (const [element, column, value] of rewrites) {
      element.rippleValues[column] = value;
      const td = element.cells[column];
      write(td, value);
      flash(td, "changed");
    }
    subscription.rows = placed;
  }

  // MARK: The socket

  function send(message) {
    if (socket && socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify(message));
  }

  function subscribe() {
    const message = { type: "subscribe", id: subscription.id, query: subscription.query };
    if (subscription.basis && subscription.lsn) message.resume = { basis: subscription.basis, lsn: subscription.lsn };
    subscription.started = false;
    send(message);
  }

  function connect() {
    clearTimeout(reconnectTimer);
    if (stopped) return;
    const url = new URL("sync", location.href);
    url.protocol = location.protocol === "https:" ? "wss:" : "ws:";
    setStatus(attempt === 0 ? "connecting" : "reconnecting", attempt === 0 ? "connecting…" : `reconnecting (attempt ${attempt + 1})…`);
    const opened = new WebSocket(url);
    socket = opened;
    lastHeard = Date.now();
    opened.onopen = () => {
      if (opened !== socket) return;
      send({ type: "hello", protocol: 1, token });
      subscribe();   // messages are handled in order: no need to wait for welcome
    };
    opened.onmessage = (event) => {
      if (opened !== socket) return;
      lastHeard = Date.now();
      let message;
      try { message = JSON.parse(event.data); } catch { return; }
      receive(message);
    };
    opened.onclose = () => {
      if (opened !== socket) return;
      socket = null;
      if (stopped) return;
      attempt += 1;
      const delay = Math.min(250 * 2 ** Math.min(attempt - 1, 5), 5000) * (0.75 + Math.random() / 2);
      setStatus("reconnecting", `disconnected; reconnecting in ${(delay / 1000).toFixed(1)} s`);
      reconnectTimer = setTimeout(connect, delay);
    };
  }

  function receive(message) {
    switch (message.type) {
      case "welcome":
        attempt = 0;
        setStatus("live", `live as ${message.user}`);
        position = message.lsn;
        break;
      case "changes": {
        frames += 1;
        const id = subscription.id;
        try {
          if (message.snapshots && message.snapshots[id]) {
            showSnapshot(message.snapshots[id]);
            subscription.started = true;
          } else if (message.changesets && message.changesets[id] && subscription.started) {
            applyChangeset(message.changesets[id]);
          } else if (message.changesets && message.changesets[id]) {
            applyChangeset(message.changesets[id]);   // a resume's changeset, from the rows kept
            subscription.started = true;
          }
        } catch (error) {
          if (!(error instanceof Misfit)) throw error;
          // The rows are not those the node made the changeset from: start afresh.
          send({ type: "unsubscribe", id });
          subscription.id = `list-${++counter}`;
          subscription.basis = null;
          subscription.lsn = null;
          subscribe();
          return;
        }
        position = message.lsn;
        if (subscription.started) subscription.lsn = message.lsn;
        settle();
        break;
      }
      case "heartbeat":
      case "pong":
        position = message.lsn;
        if (subscription.started) subscription.lsn = message.lsn;
        settle();
        break;
      case "error":
        failed(message);
        break;
    }
  }

  function failed(error) {
    const text = `${error.code}: ${error.message}`;
    if (error.id !== undefined && error.id !== subscription.id) return;   // an old subscription's
    switch (error.code) {
      case "retry_later":
        if (error.id !== undefined) setTimeout(() => { if (socket && !subscription.started) subscribe(); }, 1000);
        return;   // without an id the socket closes and the reconnect follows
      case "unauthorized":
      case "token_expired":
      case "unsupported_protocol":
        stop(`stopped (${error.code})`);
        showProblem(text + (error.code === "token_expired" ? " — sign in with a fresh token" : ""));
        return;
      case "slow_consumer":
        return;   // the socket closes; the reconnect resumes
      default:
        if (error.id !== undefined) stop(`stopped (${error.code})`);
        showProblem(text);
    }
  }

  function stop(statusText) {
    stopped = true;
    clearTimeout(reconnectTimer);
    if (socket) { const closing = socket; socket = null; closing.close(); }
    setStatus("stopped", statusText);
  }

  // A socket that goes silent is given up on: ping after 15 s, reconnect after 30 s.
  setInterval(() => {
    if (!socket || socket.readyState !== WebSocket.OPEN) return;
    const silent = Date.now() - lastHeard;
    if (silent > 30000) socket.close();
    else if (silent > 15000) send({ type: "ping" });
  }, 5000);

  // MARK: The form

  let tables = [];

  function fillColumns(selected) {
    const table = tables.find((t) => t.name === $("table").value);
    $("order").replaceChildren(new Option("(key)", ""), ...(table ? table.columns : []).map((c) => new Option(c, c)));
    if (selected !== undefined) $("order").value = selected;
  }

  function queryFromForm() {
    const query = { table: $("table").value };
    const filter = $("filter").value.trim();
    if (filter) {
      try { query.filter = JSON.parse(filter); } catch { throw new Error("the filter is not JSON"); }
    }
    if ($("order").value) query.order = [{ column: $("order").value, descending: $("descending").checked }];
    if ($("limit").value !== "") query.limit = Number($("limit").value);
    return query;
  }

  function start() {
    let query;
    try { query = queryFromForm(); } catch (error) { showProblem(error.message); return; }
    showProblem("");
    if (subscription) send({ type: "unsubscribe", id: subscription.id });
    const sameSocket = socket && token === $("token").value;
    token = $("token").value;
    subscription = { id: `list-${++counter}`, query, basis: null, lsn: null, rows: [], started: false };
    headRow.replaceChildren();
    body.replaceChildren();
    frames = 0;
    summarize();
    history.replaceState(null, "", "#" + new URLSearchParams({
      table: query.table, filter: $("filter").value.trim(), order: $("order").value,
      descending: $("descending").checked ? "1" : "", limit: $("limit").value,
    }).toString());
    stopped = false;
    if (sameSocket) subscribe();
    else {
      if (socket) { const old = socket; socket = null; old.close(); }
      attempt = 0;
      connect();
    }
  }

  // The user switch: the fragment may name users with their tokens (#as=alice:v1.…&as=bob:v1.…);
  // choosing one shows the same query as that user (a socket of their own).
  $("user").addEventListener("change", () => {
    $("token").value = $("user").value;
    start();
  });

  $("table").addEventListener("change", () => fillColumns());
  $("query").addEventListener("submit", (event) => { event.preventDefault(); start(); });

  async function load() {
    try {
      const answer = await fetch("tables");
      tables = (await answer.json()).tables;
    } catch {
      showProblem("could not read the node's tables");
    }
    $("table").replaceChildren(...tables.map((t) => new Option(t.name, t.name)));
    // The fragment may carry the form: #token=…&table=todos&filter=…&order=rank&descending=1&limit=10
    const given = new URLSearchParams(location.hash.slice(1));
    if (given.get("table")) $("table").value = given.get("table");
    fillColumns(given.get("order") || "");
    $("filter").value = given.get("filter") || "";
    $("descending").checked = given.get("descending") === "1";
    $("limit").value = given.get("limit") || "";
    const users = given.getAll("as").map((entry) => [entry.slice(0, entry.indexOf(":")), entry.slice(entry.indexOf(":") + 1)])
      .filter(([name, userToken]) => name && userToken);
    $("user").replaceChildren(...users.map(([name, userToken]) => new Option(name, userToken)));
    $("users").hidden = users.length === 0;
    if (!given.get("token") && users.length > 0) given.set("token", users[0][1]);
    if (given.get("token")) {
      $("token").value = given.get("token");
      if (users.some(([, userToken]) => userToken === given.get("token"))) $("user").value = given.get("token");
      start();   // also drops the tokens from the address bar
    }
  }

  // For tests and the console: the rows as the DOM shows them (null for an empty null cell).
  window.rippleList = {
    rows: () => Array.from(body.rows, (tr) => Array.from(tr.cells, (td) => (td.classList.contains("null") ? null : td.textContent))),
    columns: () => Array.from(headRow.cells, (th) => th.textContent),
    status: () => $("status").dataset.state,
    // The user switch: the users the fragment named, and choosing one.
    users: () => Array.from($("user").options, (option) => option.text),
    switchUser(name) {
      const option = Array.from($("user").options).find((o) => o.text === name);
      if (!option) throw new Error(`no user ${name}`);
      $("user").value = option.value;
      $("user").dispatchEvent(new Event("change"));
    },
    position: () => position,
    frames: () => frames,
    // Resolves once `condition()` holds after a frame (or now); rejects after `ms`.
    until(condition, ms = 30000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          let holds = false;
          try { holds = condition(); } catch { holds = false; }
          if (!holds) return false;
          waiters.splice(waiters.indexOf(check), 1);
          clearTimeout(timer);
          resolve(true);
          return true;
        };
        waiters.push(check);
        const timer = setTimeout(() => {
          waiters.splice(waiters.indexOf(check), 1);
          reject(new Error(`not within ${ms} ms; rows ${JSON.stringify(window.rippleList.rows())}`));
        }, ms);
        check();
      });
    },
  };

  load();
})();
