// Ripple Sync's live list: subscriptions over the sync protocol (protocol 1), shown as lists
// that follow every Postgres transaction, on one WebSocket.
//
// * The flat list: one query of one table, a table of rows.
// * The sectioned list (when the node syncs `projects` and `todos`): projects, each with its
//   todos — one subscription whose root is `projects` with a to-many include `todos` (and a
//   to-one `owner` when `users` is synced), shown as one section per project.
//
// Each changeset is applied to the DOM itself: deleted rows are removed, inserted rows created,
// moved rows moved (the same node — a todo moved to another project is one node moved from one
// section's list to the other's), and only the changed cells of updated rows rewritten (their
// text node kept). A snapshot is the only time a list is rebuilt. The socket reconnects by
// itself and resumes each subscription from its basis and position.
// Plain JavaScript, no build step, nothing downloaded.
"use strict";

(() => {
  const $ = (id) => document.getElementById(id);
  const body = $("list").tBodies[0];
  const headRow = $("list").tHead.rows[0];
  const sectionsView = $("sections");

  // The subscriptions: `flat` and `sectioned`, each { id, query, basis, lsn, started, failed,
  // show(snapshot), apply(changeset), … }. A resume presents basis and lsn.
  let flat = null;           // + columns, types, key, rows: [tr]
  let sectioned = null;      // + columns, key, sections: [article], items: [[li]] | null, owners: Map | null, …
  let token = "";
  let socket = null;
  let attempt = 0;           // failed connections in a row (backoff)
  let stopped = true;        // no reconnecting (not started, or a refusal that a retry cannot fix)
  let lastHeard = 0;
  let frames = 0;
  let position = null;
  let reconnectTimer = null;
  let counter = 0;
  let misfits = 0;           // changesets that did not fit the lists shown (each a fresh subscription)
  const waiters = [];

  const subscriptions = () => [flat, sectioned].filter((s) => s && !s.failed);

  // MARK: Status and problems

  function setStatus(state, text) {
    $("status").dataset.state = state;
    $("status").textContent = text;
  }

  function showProblem(text, element = $("problem")) {
    element.hidden = !text;
    element.textContent = text || "";
  }

  const plural = (count, noun) => `${count} ${noun}${count === 1 ? "" : "s"}`;

  function summarize() {
    const rows = flat ? flat.rows.length : 0;
    $("summary").textContent = flat && flat.started
      ? `${plural(rows, "row")} · at ${flat.lsn} · ${plural(frames, "frame")}`
      : "";
    $("empty").hidden = !(flat && flat.started && rows === 0);
    const shown = sectioned && sectioned.started;
    const items = shown && sectioned.items ? sectioned.items.reduce((sum, list) => sum + list.length, 0) : 0;
    $("sections-summary").textContent = shown
      ? `${plural(sectioned.sections.length, "project")} · ${plural(items, "todo")} · at ${sectioned.lsn}`
      : "";
    $("sections-empty").hidden = !(shown && sectioned.sections.length === 0);
  }

  function settle() {
    summarize();
    for (const waiter of waiters.slice()) waiter();
  }

  // MARK: Values

  const text = (value) => (value === null ? "" : typeof value === "string" ? value : String(value));

  function cell(value) {
    const td = document.createElement("td");
    write(td, value);
    return td;
  }

  function write(td, value) {
    td.classList.toggle("null", value === null);
    td.textContent = text(value);
  }

  // An element whose text is one text node, rewritten in place (its node kept) when it changes.
  function textElement(tag, className, value) {
    const element = document.createElement(tag);
    if (className) element.className = className;
    element.appendChild(document.createTextNode(""));
    rewrite(element, value);
    return element;
  }

  function rewrite(element, value) {
    element.classList.toggle("null", value === null);
    if (element.firstChild.data !== text(value)) element.firstChild.data = text(value);
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

  // MARK: Changesets

  class Misfit extends Error {}

  const index = (value, limit) => {
    if (!Number.isInteger(value) || value < 0 || value >= limit) throw new Misfit(`index ${value} out of range`);
    return value;
  };

  const list = (value) => {
    if (value === undefined) return [];
    if (!Array.isArray(value)) throw new Misfit("a changeset's part is not a list");
    return value;
  };

  const columnsOf = (value, width) => {
    if (typeof value !== "object" || value === null || Array.isArray(value)) throw new Misfit("changed columns that are not an object");
    return Object.entries(value).map(([column, changed]) => [index(Number(column), width), changed]);
  };

  // The protocol's algorithm ("Applying a changeset") for a list of `oldCount` rows of `width`
  // columns, checked whole before anything is touched: a changeset that does not fit throws.
  // `sources[n]` is the old index of the row at new index n (null: inserted); what arrives
  // (inserted or moved) is listed with its new index; rewrites are [new index, column, value].
  function plan(changeset, oldCount, width) {
    const deletes = list(changeset.deletes), inserts = list(changeset.inserts);
    const moves = list(changeset.moves), updates = list(changeset.updates);
    const count = oldCount - deletes.length + inserts.length;
    if (count < 0) throw new Misfit("more deletes than rows");
    const sources = new Array(count).fill(undefined);
    const taken = new Array(oldCount).fill(false);
    const take = (o) => {
      if (taken[index(o, oldCount)]) throw new Misfit(`old row ${o} taken twice`);
      taken[o] = true;
    };
    const place = (n, source) => {
      if (sources[index(n, count)] !== undefined) throw new Misfit(`place ${n} filled twice`);
      sources[n] = source;
    };
    for (const o of deletes) take(o);
    const inserted = [];   // [new index, values]
    for (const insert of inserts) {
      const [n, values] = Array.isArray(insert) ? insert : [];
      if (!Array.isArray(values) || values.length !== width) throw new Misfit("an inserted row of another width");
      place(n, null);
      inserted.push([n, values]);
    }
    const moved = [];      // [old index, new index]
    for (const move of moves) {
      const [o, n] = Array.isArray(move) ? move : [];
      take(o);
      place(n, o);
      moved.push([o, n]);
    }
    let next = 0;
    for (let o = 0; o < oldCount; o++) {
      if (taken[o]) continue;
      while (next < count && sources[next] !== undefined) next++;
      if (next === count) throw new Misfit("a kept row finds no place");
      sources[next++] = o;
    }
    if (sources.includes(undefined)) throw new Misfit("a place stays empty");
    const rewrites = [];
    for (const update of updates) {
      const [, n, columns] = Array.isArray(update) ? update : [];
      index(n, count);
      for (const [column, value] of columnsOf(columns, width)) rewrites.push([n, column, value]);
    }
    return { count, sources, deletes, inserted, moved, rewrites };
  }

  // Puts the elements arriving in `container` (each [new index, element, kind]) at their places:
  // the kept ones are already there in their new relative order.
  function arrive(container, arriving) {
    arriving.sort((a, b) => a[0] - b[0]);
    for (const [n, element, kind] of arriving) {
      container.insertBefore(element, container.children[n] || null);
      flash(element, kind);
    }
  }

  // MARK: The flat list

  function showFlatSnapshot(snapshot) {
    flat.basis = snapshot.basis;
    flat.columns = snapshot.columns;
    flat.types = snapshot.types;
    flat.key = snapshot.key;
    headRow.replaceChildren(...snapshot.columns.map((name, index) => {
      const th = document.createElement("th");
      th.textContent = name;
      th.title = snapshot.types[index];
      if (snapshot.key.includes(index)) th.classList.add("key");
      return th;
    }));
    flat.rows = snapshot.rows.map(rowElement);
    body.replaceChildren(...flat.rows);
  }

  function applyFlatChangeset(changeset) {
    const old = flat.rows;
    const { sources, deletes, inserted, moved, rewrites } = plan(changeset, old.length, flat.columns.length);
    const created = new Map(inserted.map(([n, values]) => [n, rowElement(values)]));
    const placed = sources.map((o, n) => (o === null ? created.get(n) : old[o]));

    // The DOM: out go the deleted and the moved rows; the kept rows are then in their new
    // relative order, and the arriving ones go in at their places, in ascending order.
    for (const o of deletes) old[o].remove();
    for (const [o] of moved) old[o].remove();
    arrive(body, [...inserted.map(([n]) => [n, placed[n], "inserted"]), ...moved.map(([, n]) => [n, placed[n], "moved"])]);
    for (const [n, column, value] of rewrites) {
      placed[n].rippleValues[column] = value;
      const td = placed[n].cells[column];
      write(td, value);
      flash(td, "changed");
    }
    flat.rows = placed;
  }

  // MARK: The sectioned list

  // The sectioned query, when the node syncs the tables it needs: projects by id, each with its
  // todos (by rank when they have one) and, when users are synced, its owner.
  function sectionedQuery() {
    const table = (name) => tables.find((t) => t.name === name);
    const projects = table("projects"), todos = table("todos"), users = table("users");
    if (!projects || !todos || !projects.columns.includes("id") || !todos.columns.includes("project_id")) return null;
    const include = { todos: { table: "todos", on: { id: "project_id" } } };
    if (todos.columns.includes("rank")) include.todos.order = [{ column: "rank" }];
    if (users && users.columns.includes("id") && projects.columns.includes("owner")) {
      include.owner = { table: "users", on: { owner: "id" } };
    }
    return { table: "projects", order: [{ column: "id" }], include };
  }

  // A section: a header (the project's cells, its owner's name, its number of todos) and the
  // list of its todos.
  function sectionElement(values) {
    const article = document.createElement("article");
    article.className = "section";
    article.rippleValues = values.slice();
    const header = document.createElement("header");
    values.forEach((value, column) => {
      const span = textElement("span", "cell", value);
      span.dataset.column = sectioned.columns[column];
      header.appendChild(span);
    });
    header.appendChild(textElement("span", "owner-name", ""));
    header.appendChild(textElement("span", "count", ""));
    article.appendChild(header);
    article.appendChild(document.createElement("ol"));
    return article;
  }

  // A todo: one cell per column (the page's style arranges them).
  function itemElement(values) {
    const li = document.createElement("li");
    li.rippleValues = values.slice();
    values.forEach((value, column) => {
      const span = textElement("span", "cell", value);
      span.dataset.column = sectioned.itemColumns[column];
      li.appendChild(span);
    });
    markDone(li);
    return li;
  }

  function markDone(li) {
    const done = sectioned.itemColumns.indexOf("done");
    if (done >= 0) li.classList.toggle("done", li.rippleValues[done] === true);
  }

  const identity = (row, key) => JSON.stringify(key.map((column) => row[column]));

  // Each section's header: its owner's name (the owner's id when the owner's row is not held:
  // one the user may not read) and its number of todos; text rewritten only where it changed.
  function refreshHeaders() {
    const owner = sectioned.ownerColumn;
    sectioned.sections.forEach((article, section) => {
      const [ownerName, count] = article.querySelectorAll(":scope > header > .owner-name, :scope > header > .count");
      if (owner >= 0 && sectioned.owners) {
        const reference = article.rippleValues[owner];
        const row = sectioned.owners.get(JSON.stringify([reference]));
        const name = row ? row[sectioned.ownerNameColumn] : reference;
        rewrite(ownerName, name);
        ownerName.classList.toggle("unresolved", !row);
      }
      rewrite(count, sectioned.items ? plural(sectioned.items[section].length, "todo") : "");
    });
  }

  function showSectionedSnapshot(snapshot) {
    const included = snapshot.included || {};
    const todos = included.todos && included.todos.counts ? included.todos : null;
    const owner = included.owner && !included.owner.counts ? included.owner : null;
    Object.assign(sectioned, {
      basis: snapshot.basis, columns: snapshot.columns, key: snapshot.key,
      includes: Object.keys(included),
      itemColumns: todos ? todos.columns : [], itemKey: todos ? todos.key : [],
      ownerColumn: owner ? snapshot.columns.indexOf("owner") : -1,
      ownerColumns: owner ? owner.columns : [], ownerKey: owner ? owner.key : [],
      ownerNameColumn: owner ? Math.max(owner.columns.indexOf("name"), 0) : 0,
    });
    sectionsView.classList.toggle("with-owner", owner !== null);
    sectioned.sections = snapshot.rows.map(sectionElement);
    sectioned.items = null;
    if (todos) {
      // counts[i]: how many of the rows, in order, are the todos of project i.
      let start = 0;
      sectioned.items = sectioned.sections.map((article, section) => {
        const count = todos.counts[section] || 0;
        const items = todos.rows.slice(start, start + count).map(itemElement);
        start += count;
        article.lastChild.replaceChildren(...items);
        return items;
      });
    }
    sectioned.owners = owner ? new Map(owner.rows.map((row) => [identity(row, owner.key), row])) : null;
    showProblem(todos ? "" : "the node sent the projects without their todos (it does not serve includes)", $("sections-problem"));
    refreshHeaders();
    sectionsView.replaceChildren(...sectioned.sections);
  }

  // A to-many include's change (WireSectionedChangeset.apply): item deletes and moves at old
  // paths, inserts and moves at new paths, in sections that follow the root's changeset
  // (`sources`: each new section's old section, null for a new one). Each new section keeps its
  // old section's items that were neither deleted nor moved, in order, in the free places; items
  // of removed sections go with them. Checked whole; the DOM is untouched.
  function planSections(change, old, sources, width) {
    if (typeof change !== "object" || change === null || change.put || change.delete) throw new Misfit("todos changed as a keyed set");
    const taken = old.map((items) => new Array(items.length).fill(false));
    const path = (value) => {
      if (!Array.isArray(value) || value.length !== 2) throw new Misfit("a path is [section, item]");
      return value;
    };
    const take = (value) => {
      const [section, item] = path(value);
      index(item, old[index(section, old.length)].length);
      if (taken[section][item]) throw new Misfit(`item ${value} taken twice`);
      taken[section][item] = true;
      return old[section][item];
    };
    const deleted = list(change.deletes).map(take);
    const moves = list(change.moves).map((move) => (Array.isArray(move) ? move : []));
    const movedOut = moves.map(([from]) => take(from));
    const kept = sources.map((source) => (source === null ? [] : old[source].filter((_, item) => !taken[source][item])));
    const placed = sources.map(() => new Map());   // per new section: item → [element, kind]
    const place = (value, element, kind) => {
      const [section, item] = path(value);
      index(section, placed.length);
      if (!Number.isInteger(item) || item < 0 || placed[section].has(item)) throw new Misfit(`item placed at ${value} twice`);
      placed[section].set(item, [element, kind]);
    };
    for (const insert of list(change.inserts)) {
      const [section, item, values] = Array.isArray(insert) ? insert : [];
      if (!Array.isArray(values) || values.length !== width) throw new Misfit("an inserted item of another width");
      place([section, item], itemElement(values), "inserted");
    }
    moves.forEach(([, to], offset) => place(to, movedOut[offset], "moved"));
    const lists = kept.map((items, section) => {
      const count = items.length + placed[section].size;
      for (const item of placed[section].keys()) index(item, count);
      let next = 0;
      return Array.from({ length: count }, (_, item) => (placed[section].has(item) ? placed[section].get(item)[0] : items[next++]));
    });
    const rewrites = [];
    for (const update of list(change.updates)) {
      const [, to, columns] = Array.isArray(update) ? update : [];
      const [section, item] = path(to);
      const element = lists[index(section, lists.length)][index(item, lists[section].length)];
      for (const [column, value] of columnsOf(columns, width)) rewrites.push([element, column, value]);
    }
    return { lists, deleted, movedOut, placed, rewrites };
  }

  // A to-one include's change (WireKeyedChange.apply): deletes by key of rows held, puts that
  // patch a row held or bring a new one whole. Returns the new set; the old one is untouched.
  function planKeyed(change, rows, key, width) {
    if (typeof change !== "object" || change === null || change.deletes || change.inserts || change.moves || change.updates) {
      throw new Misfit("owner changed as a sectioned list");
    }
    const result = new Map(rows);
    for (const gone of list(change.delete)) {
      if (!result.delete(JSON.stringify(gone))) throw new Misfit(`delete of ${JSON.stringify(gone)}, which is not held`);
    }
    for (const put of list(change.put)) {
      const columns = columnsOf(put, width);
      if (!key.every((column) => String(column) in put)) throw new Misfit("a put lacks a key column");
      const name = JSON.stringify(key.map((column) => put[String(column)]));
      const held = result.get(name);
      if (!held && columns.length !== width) throw new Misfit(`a put of ${name}, which is not held, is not whole`);
      const row = held ? held.slice() : new Array(width);
      for (const [column, value] of columns) row[column] = value;
      result.set(name, row);
    }
    return result;
  }

  // One frame of the sectioned subscription: the root's changeset to the sections, then the
  // todos' sectioned change by path, then the owners' keyed change; all checked before the DOM
  // is touched.
  function applySectionedChangeset(changeset) {
    const old = sectioned.sections;
    const root = plan(changeset, old.length, sectioned.columns.length);
    const included = changeset.included || {};
    if (typeof included !== "object") throw new Misfit("included is not an object");
    for (const path of Object.keys(included)) {
      if (!sectioned.includes.includes(path)) throw new Misfit(`a change of include ${path}, which the subscription does not have`);
    }
    const created = new Map(root.inserted.map(([n, values]) => [n, sectionElement(values)]));
    const placed = root.sources.map((o, n) => (o === null ? created.get(n) : old[o]));
    const items = sectioned.items
      ? planSections(included.todos || {}, sectioned.items, root.sources, sectioned.itemColumns.length) : null;
    const owners = sectioned.owners && included.owner
      ? planKeyed(included.owner, sectioned.owners, sectioned.ownerKey, sectioned.ownerColumns.length) : sectioned.owners;

    // The DOM. Items leaving their lists first (a moved item is taken out of its old section's
    // list — also when that section goes — and put into its new one: the same node).
    if (items) {
      for (const li of items.deleted) li.remove();
      for (const li of items.movedOut) li.remove();
    }
    // The sections, as the flat list's rows (a removed section takes its remaining items along).
    for (const o of root.deletes) old[o].remove();
    for (const [o] of root.moved) old[o].remove();
    arrive(sectionsView, [...root.inserted.map(([n]) => [n, placed[n], "inserted"]), ...root.moved.map(([, n]) => [n, placed[n], "moved"])]);
    for (const [n, column, value] of root.rewrites) {
      placed[n].rippleValues[column] = value;
      const span = placed[n].firstChild.children[column];
      rewrite(span, value);
      flash(span, "changed");
    }
    // The items into their sections' lists, each in ascending order of place.
    if (items) {
      items.placed.forEach((arriving, section) => {
        arrive(placed[section].lastChild, Array.from(arriving, ([item, [element, kind]]) => [item, element, kind]));
      });
      for (const [li, column, value] of items.rewrites) {
        li.rippleValues[column] = value;
        rewrite(li.children[column], value);
        flash(li.children[column], "changed");
        markDone(li);
      }
      sectioned.items = items.lists;
    }
    sectioned.sections = placed;
    sectioned.owners = owners;
    refreshHeaders();
  }

  // MARK: The socket

  function send(message) {
    if (socket && socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify(message));
  }

  function subscribe(subscription) {
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
      subscriptions().forEach(subscribe);   // messages are handled in order: no need to wait for welcome
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

  // One subscription's part of a frame: a snapshot, or a changeset (a resume's, from the rows
  // kept, or a later one). A changeset that does not fit means the rows are not those the node
  // made it from: the subscription starts afresh.
  function receiveFor(subscription, message) {
    const id = subscription.id;
    try {
      if (message.snapshots && message.snapshots[id]) {
        subscription.show(message.snapshots[id]);
        subscription.started = true;
      } else if (message.changesets && message.changesets[id]) {
        subscription.apply(message.changesets[id]);
        subscription.started = true;
      }
    } catch (error) {
      if (!(error instanceof Misfit)) throw error;
      console.warn(`${id}: ${error.message}; subscribing afresh`);
      misfits += 1;
      send({ type: "unsubscribe", id });
      subscription.id = `${subscription.kind}-${++counter}`;
      subscription.basis = null;
      subscription.lsn = null;
      subscribe(subscription);
    }
  }

  function receive(message) {
    switch (message.type) {
      case "welcome":
        attempt = 0;
        setStatus("live", `live as ${message.user}`);
        position = message.lsn;
        break;
      case "changes":
        frames += 1;
        for (const subscription of subscriptions()) receiveFor(subscription, message);
        advance(message.lsn);
        break;
      case "heartbeat":
      case "pong":
        advance(message.lsn);
        break;
      case "error":
        failed(message);
        break;
    }
  }

  function advance(lsn) {
    position = lsn;
    for (const subscription of subscriptions()) if (subscription.started) subscription.lsn = lsn;
    settle();
  }

  function failed(error) {
    const text = `${error.code}: ${error.message}`;
    const subscription = error.id === undefined ? null : subscriptions().find((s) => s.id === error.id);
    if (error.id !== undefined && !subscription) return;   // an old subscription's
    if (subscription && subscription === sectioned && error.code !== "retry_later") {
      // The sectioned list alone stops; the flat list goes on.
      sectioned.failed = true;
      showProblem(`the sectioned list stopped: ${text}`, $("sections-problem"));
      return;
    }
    if (refusesToken(error.code)) {
      // The node refused the token: it refuses it again on every reconnect, so the page stops
      // and says what to do instead of reconnecting.
      stop(`stopped: ${error.code === "token_expired" ? "the token expired" : "the token was refused"}`);
      showProblem(`The node refused the token — ${text}. `
        + (error.code === "token_expired" ? "Give a fresh token" : "Give another token (a node token or a JWT your identity provider signed)")
        + " and press “Show live”.");
      return;
    }
    switch (error.code) {
      case "retry_later":
        if (subscription) setTimeout(() => { if (socket && !subscription.started && !subscription.failed) subscribe(subscription); }, 1000);
        return;   // without an id the socket closes and the reconnect follows
      case "unsupported_protocol":
        stop(`stopped (${error.code})`);
        showProblem(text);
        return;
      case "slow_consumer":
        return;   // the socket closes; the reconnect resumes
      default:
        if (subscription) stop(`stopped (${error.code})`);
        showProblem(text);
    }
  }

  // Whether an error's code refuses the socket's token (`unauthorized`, `token_expired`, the
  // other `token_…` codes): no reconnect with the same token helps.
  const refusesToken = (code) => typeof code === "string" && (code === "unauthorized" || code.startsWith("token_"));

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
    showProblem("", $("sections-problem"));
    for (const subscription of subscriptions()) send({ type: "unsubscribe", id: subscription.id });
    const sameSocket = socket && token === $("token").value;
    token = $("token").value;
    flat = { kind: "list", id: `list-${++counter}`, query, basis: null, lsn: null, rows: [], started: false,
             show: showFlatSnapshot, apply: applyFlatChangeset };
    headRow.replaceChildren();
    body.replaceChildren();
    $("flat-title").textContent = query.table;
    const sectionedShown = sectionedQuery();
    sectioned = sectionedShown && {
      kind: "sections", id: `sections-${++counter}`, query: sectionedShown, basis: null, lsn: null, started: false,
      sections: [], items: [], owners: null, includes: [], show: showSectionedSnapshot, apply: applySectionedChangeset,
    };
    sectionsView.replaceChildren();
    $("sectioned").hidden = !sectioned;
    $("columns").classList.toggle("two", !!sectioned);
    frames = 0;
    summarize();
    history.replaceState(null, "", "#" + new URLSearchParams({
      table: query.table, filter: $("filter").value.trim(), order: $("order").value,
      descending: $("descending").checked ? "1" : "", limit: $("limit").value,
    }).toString());
    stopped = false;
    if (sameSocket) subscriptions().forEach(subscribe);
    else {
      if (socket) { const old = socket; socket = null; old.close(); }
      attempt = 0;
      connect();
    }
  }

  // The user switch: the fragment may name users with their tokens (#as=alice:v1.…&as=bob:v1.…);
  // choosing one shows the same queries as that user (a socket of their own).
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

  const texts = (elements) => Array.from(elements, (element) => (element.classList.contains("null") ? null : element.textContent));

  // For tests and the console: the lists as the DOM shows them (null for an empty null cell).
  window.rippleList = {
    rows: () => Array.from(body.rows, (tr) => texts(tr.cells)),
    columns: () => Array.from(headRow.cells, (th) => th.textContent),
    // The sectioned list: each section's project (its cells), its owner's name as shown (null
    // without an owner include) and its todos (their cells).
    sections: () => Array.from(sectionsView.children, (article) => {
      const header = article.firstChild;
      return {
        row: texts(header.querySelectorAll(":scope > .cell")),
        owner: sectionsView.classList.contains("with-owner") ? header.querySelector(":scope > .owner-name").textContent : null,
        items: Array.from(article.lastChild.children, (li) => texts(li.children)),
      };
    }),
    // Whether the sectioned list is shown and has its first result.
    sectionsLive: () => !!(sectioned && sectioned.started && !sectioned.failed),
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
    // How many changesets did not fit the lists shown (the page then subscribed afresh).
    misfits: () => misfits,
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
          reject(new Error(`not within ${ms} ms; rows ${JSON.stringify(window.rippleList.rows())}; `
            + `sections ${JSON.stringify(window.rippleList.sections())}; problems ${JSON.stringify([$("problem").textContent, $("sections-problem").textContent])}`));
        }, ms);
        check();
      });
    },
  };

  load();
})();
