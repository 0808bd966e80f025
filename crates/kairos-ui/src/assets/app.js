// The kairos operator page: loads this page's server-rendered fragment with the bearer
// token kept in this tab (sessionStorage), and sends every action to the public JSON API
// (same origin, JSON body), showing its answers and problem+json errors as they come.
(function () {
  "use strict";
  var body = document.body;
  var content = document.getElementById("content");
  var flash = document.getElementById("flash");
  var tokenPanel = document.getElementById("token-panel");
  var tokenForm = document.getElementById("token-form");
  var forget = document.getElementById("forget");
  var KEY = "kairos.token";
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
    var text = res.status + " " + (REASONS[res.status] || res.statusText || "Error");
    try {
      var p = JSON.parse(await res.text());
      if (p.title) { text += " — " + p.title; }
      if (p.detail) { text += ": " + p.detail; }
      if (p.errors && p.errors.length > 1) {
        text += " (" + p.errors.map(function (e) { return e.field + " " + e.rule; }).join("; ") + ")";
      }
    } catch (e) { /* not JSON: the status says it */ }
    return text;
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

  function say(text, isError) {
    flash.textContent = text;
    flash.className = isError ? "error" : "ok";
    flash.setAttribute("role", isError ? "alert" : "status");
  }

  function showTokenPanel(show) {
    tokenPanel.hidden = !show;
    if (show) { document.getElementById("token").focus(); }
  }

  async function load() {
    forget.hidden = !token();
    if (needsToken && !token()) {
      content.innerHTML = "";
      content.append(problemBox("Sign in: this kairos requires a bearer token.", 0));
      showTokenPanel(true);
      return;
    }
    content.setAttribute("aria-busy", "true");
    var res;
    try {
      res = await fetch(body.dataset.fragment + location.search, { headers: headers(false) });
    } catch (e) {
      content.innerHTML = "";
      content.append(problemBox("The request failed: " + e.message, 0));
      return;
    }
    var html = (res.headers.get("Content-Type") || "").indexOf("text/html") === 0;
    if (res.ok && html) {
      content.innerHTML = await res.text();
    } else if (res.ok) {
      content.innerHTML = "";
      content.append(problemBox("Unexpected answer (not an HTML fragment).", res.status));
    } else {
      var text = await problemText(res);
      content.innerHTML = "";
      content.append(problemBox(text, res.status));
      if (res.status === 401) { showTokenPanel(true); }
    }
    content.setAttribute("aria-busy", "false");
  }

  // Sends one action to the JSON API; resolves to its JSON answer (null when empty), or
  // rejects with the problem's text.
  async function send(path, payload) {
    var res = await fetch(path, { method: "POST", headers: headers(true), body: JSON.stringify(payload) });
    if (!res.ok) { throw new Error(await problemText(res)); }
    var text = await res.text();
    return text ? JSON.parse(text) : null;
  }

  function requestId() {
    return "ui-" + Date.now().toString(36) + "-" + Math.random().toString(36).slice(2, 10);
  }

  async function act(work) {
    try {
      var message = await work();
      say(message, false);
      await load();
      flash.focus && flash.focus();
    } catch (e) {
      say(e.message, true);
    }
  }

  var forms = {
    "pause-form": function (form) {
      var paused = form.dataset.paused === "true";
      var payload = { schedule_id: form.dataset.schedule, paused: !paused };
      var note = form.elements.note.value.trim();
      // Only a non-empty note is sent: an API without pause notes refuses unknown fields.
      if (note) { payload.note = note; }
      return act(async function () {
        await send("/schedules/pause", payload);
        return (paused ? "Resumed " : "Paused ") + form.dataset.schedule + ".";
      });
    },
    "trigger-form": function (form) {
      var id = form.dataset.schedule;
      return act(async function () {
        var run = await send("/schedules/" + id + "/trigger", { request_id: requestId() });
        return "Triggered " + id + ": run " + run.idempotency_key.slice(0, 12) + "… is " + run.status + ".";
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
    "cancel-form": function (form) {
      var key = form.dataset.key;
      var reason = form.elements.reason.value.trim();
      return act(async function () {
        var answer = await send("/runs/" + key + "/cancel", reason ? { reason: reason } : {});
        var status = answer && answer.status ? " It is " + answer.status + "." : "";
        return "Cancel of run " + key.slice(0, 12) + "… accepted." + status;
      });
    }
  };

  content.addEventListener("submit", function (ev) {
    var handler = forms[ev.target.id];
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
    } else if (button.classList.contains("retry")) {
      act(async function () {
        var run = await send("/runs/" + button.dataset.key + "/retry", { request_id: requestId() });
        return "Retry of run " + button.dataset.key.slice(0, 12) + "…: " + (run && run.status ? run.status : "accepted") + ".";
      });
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

  load();
})();
