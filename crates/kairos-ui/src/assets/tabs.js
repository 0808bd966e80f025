// Tabs of the operator page (WAI-ARIA: role tablist, tab, tabpanel, aria-selected): a
// click, or the arrow keys, Home and End, select a tab; the URL fragment names the open one
// (`#history`), so a link opens it and it stays open across the page's refreshes (app.js
// fires "fragment" on #content after each new fragment). Served before app.js, in one file.
(function () {
  "use strict";
  var content = document.getElementById("content");
  if (!content) { return; }

  // Selects the tab of panel `panel`; an unknown one (or none) changes nothing.
  function select(panel) {
    var tabs = Array.prototype.slice.call(content.querySelectorAll("[role=tab]"));
    if (!panel || !tabs.some(function (tab) { return tab.getAttribute("aria-controls") === panel; })) {
      return false;
    }
    tabs.forEach(function (tab) {
      var on = tab.getAttribute("aria-controls") === panel;
      tab.setAttribute("aria-selected", on ? "true" : "false");
      tab.setAttribute("tabindex", on ? "0" : "-1");
      var shown = document.getElementById(tab.getAttribute("aria-controls"));
      if (shown) { shown.hidden = !on; }
    });
    return true;
  }

  function open(tab) {
    var panel = tab.getAttribute("aria-controls");
    if (select(panel)) {
      history.replaceState(null, "", "#" + panel);
      tab.focus();
    }
  }

  content.addEventListener("click", function (ev) {
    var tab = ev.target.closest && ev.target.closest("[role=tab]");
    if (!tab) { return; }
    ev.preventDefault();
    open(tab);
  });

  content.addEventListener("keydown", function (ev) {
    var tab = ev.target.closest && ev.target.closest("[role=tab]");
    if (!tab) { return; }
    var tabs = Array.prototype.slice.call(tab.parentElement.querySelectorAll("[role=tab]"));
    var i = tabs.indexOf(tab);
    var to = { ArrowRight: i + 1, ArrowLeft: i - 1, Home: 0, End: tabs.length - 1 }[ev.key];
    if (to === undefined) { return; }
    ev.preventDefault();
    open(tabs[(to + tabs.length) % tabs.length]);
  });

  content.addEventListener("fragment", function () { select(location.hash.slice(1)); });
  window.addEventListener("hashchange", function () { select(location.hash.slice(1)); });
})();
