// The kairos operator page: loads this page's server-rendered fragment with the bearer
// token kept in this tab (sessionStorage), reloads it every few seconds unless a form on it
// is being edited, and sends every action to the public JSON API (same origin, JSON body),
// showing its answers and problem+json errors as they come; a 404 becomes a not-found page.
(function () {
  "use strict";
  var body = document.body;
  var content = document.getElementById("content");
  var flash = document.getElementById("flash");
  var tokenPanel = document.getElementById("token-panel");
  var tokenForm = document.getElementById("token-form");
  var forget = document.getElementById("forget");
  var KEY = "kairos.token";
  var FLASH = "kairos.flash"; // a message carried over a navigation (after a delete)
  var REFRESH_MS = 5000;
  var refreshNote = document.getElementById("refresh-note");
  var refreshState = document.getElementById("refresh-state");
  var loading = false;
  var lastOk = false;
  var shown = null; // the fragment on the page, to skip a refresh that changed nothing
  var needsToken = body.dataset.auth !== "none";
  var REASONS = { 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
    405: "Method Not Allowed", 409: "Conflict", 413: "Payload Too Large", 415: "Unsupported Media Type",
    500: "Internal Server Error", 503: "Service Unavailable" };

  function token() { return sessionStorage.getItem(KEY) || ""; }

  function headers(json) {
    var h = { "Accept": "text/html, application/json" };
    if (token()) { h["Authorization"] = "Bearer " + token(); }
    if (json) { h["Content-Type"] = "application/json"; }
    return h;
  }

  // "401 Unauthorized: <detail> (field: rule; ...)" from a refused answer.
  async function problemText(res) {
    return problemOf(res.status, await res.text()).text;
  }

  // The text of a refusal and its problem's detail, from the answer's status and body.
  function problemOf(status, bodyText) {
    var text = status + " " + (REASONS[status] || "Error");
    var detail = "";
    try {
      var p = JSON.parse(bodyText);
      detail = p.detail || "";
      if (p.title) { text += " — " + p.title; }
      if (p.detail) { text += ": " + p.detail; }
      if (p.errors && p.errors.length > 1) {
        text += " (" + p.errors.map(function (e) { return e.field + " " + e.rule; }).join("; ") + ")";
      }
    } catch (e) { /* not JSON: the status says it */ }
    return { text: text, detail: detail };
  }

  function element(tag, attrs, children) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (name) { node.setAttribute(name, attrs[name]); });
    (children || []).forEach(function (child) {
      node.append(typeof child === "string" ? document.createTextNode(child) : child);
    });
    return node;
  }

  // The not-found page: what is missing, the likely why, and where to go instead.
  function notFound(detail) {
    var params = new URLSearchParams(location.search);
    var lead, links = [["/ui", "Schedules"], ["/ui/runs", "Runs"]];
    if (body.dataset.page === "schedule") {
      var id = decodeURIComponent(location.pathname.split("/").pop());
      lead = "There is no schedule \u201c" + id + "\u201d. It was deleted, or the link is wrong. " +
        "The runs it made stay listed under Runs.";
      links = [["/ui", "All schedules"], ["/ui/runs?schedule_id=" + encodeURIComponent(id), "Runs of " + id]];
    } else if (body.dataset.page === "workflow") {
      var workflow = decodeURIComponent(location.pathname.split("/").pop());
      lead = params.get("version")
        ? "Workflow \u201c" + workflow + "\u201d has no version " + params.get("version") + "."
        : "There is no workflow \u201c" + workflow + "\u201d: no version of it is stored.";
      links = [["/ui/workflows/" + encodeURIComponent(workflow), "Workflow " + workflow], ["/ui", "Schedules"]];
    } else if (body.dataset.page === "run" || (body.dataset.page === "runs" && params.get("key"))) {
      var key = body.dataset.page === "run"
        ? decodeURIComponent(location.pathname.split("/").pop())
        : params.get("key");
      lead = "There is no run \u201c" + key + "\u201d. The link is wrong, or the run " +
        "was removed by retention.";
      links = [["/ui/runs", "All runs"], ["/ui", "Schedules"]];
    } else {
      lead = "Nothing here: this page does not exist.";
    }
    return element("section", { "class": "not-found", id: "not-found", "aria-labelledby": "not-found-title" }, [
      element("h1", { id: "not-found-title" }, ["Not found"]),
      element("p", { "class": "lead", id: "not-found-lead" }, [lead]),
      detail ? element("p", { "class": "muted" }, ["The API said: " + detail]) : "",
      element("p", { "class": "links" }, links.map(function (link) {
        return element("a", { href: link[0] }, [link[1]]);
      }))
    ]);
  }

  function problemBox(text, status) {
    var box = document.createElement("div");
    box.className = "problem";
    box.id = "problem";
    box.setAttribute("role", "alert");
    box.dataset.status = String(status || 0);
    box.textContent = text;
    return box;
  }

  // Shows `text`; with `key`, a link to that run's page after it.
  function say(text, isError, key) {
    flash.textContent = text;
    if (key) {
      flash.append(" ", element("a", { href: "/ui/runs/" + encodeURIComponent(key), id: "flash-run" }, ["Open the run"]));
    }
    flash.className = isError ? "error" : "ok";
    flash.setAttribute("role", isError ? "alert" : "status");
  }

  function showTokenPanel(show) {
    tokenPanel.hidden = !show;
    if (show) { document.getElementById("token").focus(); }
  }

  // Loads the page's fragment. A refresh (`quiet`) leaves the page alone when the fragment
  // did not change and shows a failure in the flash, not in place of the page.
  async function load(quiet) {
    forget.hidden = !token();
    if (needsToken && !token()) {
      lastOk = false;
      content.innerHTML = "";
      content.append(problemBox("Sign in: this kairos requires a bearer token.", 0));
      showTokenPanel(true);
      return;
    }
    loading = true;
    if (!quiet) { content.setAttribute("aria-busy", "true"); }
    var res;
    try {
      res = await fetch(body.dataset.fragment + location.search, { headers: headers(false) });
    } catch (e) {
      loading = false;
      if (quiet) { say("Refresh failed: " + e.message, true); return; }
      lastOk = false;
      content.innerHTML = "";
      content.append(problemBox("The request failed: " + e.message, 0));
      return;
    }
    var html = (res.headers.get("Content-Type") || "").indexOf("text/html") === 0;
    var text = await res.text();
    // Editing began while the refresh was on its way: keep what is being done.
    if (quiet && editing()) { loading = false; return; }
    lastOk = res.ok && html;
    if (res.ok && html) {
      if (!quiet || text !== shown) {
        content.innerHTML = text;
        shown = text;
        // tabs.js selects the tab the URL names in the new fragment.
        content.dispatchEvent(new CustomEvent("fragment"));
      }
    } else if (res.ok) {
      content.innerHTML = "";
      content.append(problemBox("Unexpected answer (not an HTML fragment).", res.status));
    } else {
      var problem = problemOf(res.status, text);
      content.innerHTML = "";
      shown = null;
      content.append(res.status === 404 ? notFound(problem.detail) : problemBox(problem.text, res.status));
      if (res.status === 401) { showTokenPanel(true); }
    }
    content.dataset.loads = String(Number(content.dataset.loads || "0") + 1);
    content.setAttribute("aria-busy", "false");
    refreshNote.hidden = !lastOk;
    loading = false;
  }

  // Why a refresh would now lose what the person is doing ("" when nothing would be lost).
  function editing() {
    var active = document.activeElement;
    if (active && content.contains(active) && /^(INPUT|SELECT|TEXTAREA)$/.test(active.tagName)) {
      return "a field has focus";
    }
    if (content.querySelector("form[data-dirty]")) { return "a form has changes not sent"; }
    if (content.querySelector(".problem.inline")) { return "an error is shown next to a control"; }
    if (content.querySelector("#cancel-form:not([hidden]), #delete-form:not([hidden])")) {
      return "a confirmation is open";
    }
    var plan = document.getElementById("backfill-plan");
    if (plan && plan.childElementCount > 0) { return "a backfill plan is shown"; }
    return "";
  }

  function tick() {
    if (loading || !lastOk || document.hidden) { return; }
    var why = editing();
    refreshState.textContent = why ? "Paused: " + why + "." : "";
    refreshNote.dataset.paused = why ? "true" : "false";
    if (!why) { load(true); }
  }

  // Sends one action to the JSON API; resolves to its JSON answer (null when empty), or
  // rejects with the problem's text.
  async function send(path, payload, method) {
    var init = payload === undefined ?
      { method: method || "POST", headers: headers(false) } :
      { method: method || "POST", headers: headers(true), body: JSON.stringify(payload) };
    var res = await fetch(path, init);
    if (!res.ok) {
      var refused = new Error(await problemText(res));
      refused.status = res.status;
      throw refused;
    }
    var text = await res.text();
    return text ? JSON.parse(text) : null;
  }

  function requestId() {
    return "ui-" + Date.now().toString(36) + "-" + Math.random().toString(36).slice(2, 10);
  }

  // Runs one action. Its answer goes to the flash; a refusal too, or, with `place`, next to
  // the control that sent it (inside `place`), where it stays until the next action.
  async function act(work, place) {
    clearProblems();
    try {
      var message = await work();
      // A work may answer [text, run key] to link the run it acted on.
      if (Array.isArray(message)) { say(message[0], false, message[1]); } else { say(message, false); }
      await load();
      flash.focus && flash.focus();
    } catch (e) {
      if (place && content.contains(place)) {
        say("", false);
        var box = problemBox(e.message, e.status);
        box.removeAttribute("id");
        box.classList.add("inline");
        place.append(box);
      } else {
        say(e.message, true);
      }
    }
  }

  function clearProblems() {
    content.querySelectorAll(".problem.inline").forEach(function (box) { box.remove(); });
  }

  // "2026-03-09 12:00" (or with seconds, or a T) is UTC, as the form's label says: an RFC 3339
  // time in UTC. Anything else is sent as typed (an explicit offset is honoured; the API
  // refuses what is not a time, naming `until`).
  function utcInstant(text) {
    var bare = /^(\d{4}-\d{2}-\d{2})[T ](\d{2}:\d{2})(:\d{2})?$/.exec(text);
    return bare ? bare[1] + "T" + bare[2] + (bare[3] || ":00") + "Z" : text;
  }

  // "2026-03-09T13:00:00Z" as the page says it: "2026-03-09 13:00:00 UTC".
  function saidUtc(rfc3339) {
    return rfc3339.replace("T", " ").replace(/Z$/, " UTC");
  }

  var forms = {
    "pause-form": function (form) {
      var paused = form.dataset.paused === "true";
      var payload = { schedule_id: form.dataset.schedule, paused: !paused };
      var note = form.elements.note.value.trim();
      // Only a non-empty note is sent: an API without pause notes refuses unknown fields.
      if (note) { payload.note = note; }
      var until = !paused && form.elements.until ? form.elements.until.value.trim() : "";
      if (until) { payload.until = utcInstant(until); }
      return act(async function () {
        await send("/schedules/pause", payload);
        if (paused) { return "Resumed " + form.dataset.schedule + "."; }
        return "Paused " + form.dataset.schedule + (until ? " until " + saidUtc(payload.until) : "") + ".";
      }, form);
    },
    "trigger-form": function (form) {
      var id = form.dataset.schedule;
      return act(async function () {
        var run = await send("/schedules/" + id + "/trigger", { request_id: requestId() });
        return ["Triggered " + id + ": run " + run.idempotency_key.slice(0, 12) + "… is " + run.status + ".", run.idempotency_key];
      });
    },
    "backfill-form": async function (form) {
      var id = form.dataset.schedule;
      var target = document.getElementById("backfill-plan");
      var query = new URLSearchParams({ from: form.elements.from.value.trim(), to: form.elements.to.value.trim() });
      var res = await fetch("/ui/fragments/schedules/" + id + "/backfill?" + query, { headers: headers(false) });
      target.innerHTML = "";
      if (res.ok && (res.headers.get("Content-Type") || "").indexOf("text/html") === 0) {
        target.innerHTML = await res.text();
      } else { target.append(problemBox(await problemText(res), res.status)); }
    },
    "delete-form": async function (form) {
      var id = form.dataset.schedule;
      try {
        await send("/schedules/" + encodeURIComponent(id), undefined, "DELETE");
      } catch (e) {
        say(e.message, true);
        return;
      }
      // The schedule is gone: its page would now be a not-found; go to the list.
      sessionStorage.setItem(FLASH, "Deleted schedule " + id + ". Its run history stays under Runs.");
      location.assign("/ui");
    },
    "cancel-form": function (form) {
      var key = form.dataset.key;
      var reason = form.elements.reason.value.trim();
      return act(async function () {
        var answer = await send("/runs/" + key + "/cancel", reason ? { reason: reason } : {});
        var status = answer && answer.status ? " It is " + answer.status + "." : "";
        return ["Cancel of run " + key.slice(0, 12) + "… accepted." + status, key];
      });
    }
  };

  // A form typed into but not sent holds the refresh.
  content.addEventListener("input", function (ev) {
    var form = ev.target.closest && ev.target.closest("form");
    if (form) { form.dataset.dirty = "true"; }
  });

  // Skip one fire time (`data-run-at`) of the schedule, with the note if one was written.
  function skip(form) {
    var id = form.dataset.schedule;
    var at = form.dataset.runAt;
    var payload = { run_at: at };
    var note = form.elements.note.value.trim();
    if (note) { payload.note = note; }
    return act(async function () {
      await send("/schedules/" + encodeURIComponent(id) + "/skips", payload);
      return "Skipped the fire time " + saidUtc(at) + " of " + id + ".";
    }, form.parentElement);
  }

  content.addEventListener("submit", function (ev) {
    var handler = forms[ev.target.id] || (ev.target.classList.contains("skip-form") ? skip : null);
    if (!handler) { return; } // the filter forms navigate as usual
    ev.preventDefault();
    handler(ev.target);
  });

  content.addEventListener("click", function (ev) {
    var button = ev.target.closest("button");
    if (!button) { return; }
    var cancelForm = document.getElementById("cancel-form");
    if (button.classList.contains("cancel")) {
      cancelForm.dataset.key = button.dataset.key;
      document.getElementById("cancel-key").textContent = button.dataset.key;
      cancelForm.hidden = false;
      document.getElementById("cancel-reason").focus();
    } else if (button.id === "cancel-dismiss") {
      cancelForm.hidden = true;
    } else if (button.id === "delete-button") {
      document.getElementById("delete-form").hidden = false;
      document.getElementById("delete-confirm").focus();
    } else if (button.id === "delete-dismiss") {
      document.getElementById("delete-form").hidden = true;
    } else if (button.classList.contains("retry")) {
      act(async function () {
        var run = await send("/runs/" + button.dataset.key + "/retry", { request_id: requestId() });
        return ["Retry of run " + button.dataset.key.slice(0, 12) + "…: " + (run && run.status ? run.status : "accepted") + ".", button.dataset.key];
      });
    } else if (button.classList.contains("unskip")) {
      var schedule = button.dataset.schedule;
      var at = button.dataset.runAt;
      act(async function () {
        await send("/schedules/" + encodeURIComponent(schedule) + "/skips/" + encodeURIComponent(at), undefined, "DELETE");
        return "Took back the skip of " + saidUtc(at) + ": " + schedule + " fires then again.";
      }, button.parentElement);
    } else if (button.id === "backfill-confirm") {
      var id = button.dataset.schedule;
      act(async function () {
        var done = await send("/schedules/" + id + "/backfill", { from: button.dataset.from, to: button.dataset.to });
        return "Backfill of " + id + ": " + done.ticks + " ticks, " + done.created + " runs created, " +
          done.already_present + " already present.";
      });
    }
  });

  tokenForm.addEventListener("submit", function (ev) {
    ev.preventDefault();
    sessionStorage.setItem(KEY, document.getElementById("token").value.trim());
    document.getElementById("token").value = "";
    showTokenPanel(false);
    say("", false);
    load();
  });

  forget.addEventListener("click", function () {
    sessionStorage.removeItem(KEY);
    load();
  });

  var carried = sessionStorage.getItem(FLASH);
  if (carried) {
    sessionStorage.removeItem(FLASH);
    say(carried, false);
  }
  load();
  setInterval(tick, REFRESH_MS);
})();
