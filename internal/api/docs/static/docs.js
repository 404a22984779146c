// API reference page enhancements. The page is complete without this
// script; it adds an operation filter, expand/collapse-all buttons, copy
// buttons for the curl examples, and opens a collapsed section when a link
// points into it. It loads nothing and talks to no server.
(function () {
  "use strict";

  function all(sel, root) {
    return Array.prototype.slice.call((root || document).querySelectorAll(sel));
  }

  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    if (text) { e.textContent = text; }
    return e;
  }

  // Curl examples name the server $BASE_URL; this page came from it.
  function fillBaseURL() {
    var origin = window.location.origin;
    if (!origin || origin === "null") { return; }
    all("code.curl").forEach(function (c) {
      c.textContent = c.textContent.split("$BASE_URL").join(origin);
    });
  }

  function copyText(text, done) {
    if (navigator.clipboard && navigator.clipboard.writeText) {
      navigator.clipboard.writeText(text).then(function () { done(true); }, function () { done(false); });
      return;
    }
    var area = el("textarea");
    area.value = text;
    document.body.appendChild(area);
    area.select();
    var ok = false;
    try { ok = document.execCommand("copy"); } catch (e) { ok = false; }
    document.body.removeChild(area);
    done(ok);
  }

  function addCopyButtons() {
    all("pre.curl").forEach(function (pre) {
      var button = el("button", { type: "button", "class": "copy" }, "Copy");
      button.addEventListener("click", function () {
        copyText(pre.querySelector("code").textContent, function (ok) {
          button.textContent = ok ? "Copied" : "Copy failed";
          setTimeout(function () { button.textContent = "Copy"; }, 1500);
        });
      });
      pre.appendChild(button);
    });
  }

  function addTools() {
    var toc = document.getElementById("contents");
    var ops = all("details.op");
    if (!toc || ops.length === 0) { return; }
    var tools = el("div", { "class": "tools", role: "search" });
    var input = el("input", { type: "search", placeholder: "Filter operations ( / )", "aria-label": "Filter operations" });
    var expand = el("button", { type: "button" }, "Expand all");
    var collapse = el("button", { type: "button" }, "Collapse all");
    var matches = el("span", { "class": "matches", "aria-live": "polite" });
    tools.appendChild(input);
    tools.appendChild(expand);
    tools.appendChild(collapse);
    tools.appendChild(matches);
    toc.insertBefore(tools, toc.firstChild);

    expand.addEventListener("click", function () { ops.forEach(function (d) { d.open = true; }); });
    collapse.addEventListener("click", function () { ops.forEach(function (d) { d.open = false; }); });

    function filter() {
      var terms = input.value.toLowerCase().split(/\s+/).filter(Boolean);
      var shown = 0;
      ops.forEach(function (op) {
        var text = op.getAttribute("data-search") || "";
        var hit = terms.every(function (t) { return text.indexOf(t) >= 0; });
        op.hidden = !hit;
        if (hit) { shown++; }
        var entry = toc.querySelector('li[data-op="' + op.id + '"]');
        if (entry) { entry.hidden = !hit; }
      });
      all("section.group[data-group]").forEach(function (g) {
        var visible = all("details.op", g).some(function (op) { return !op.hidden; });
        g.hidden = !visible;
        var entry = toc.querySelector('li.toc-group[data-group="' + g.id + '"]');
        if (entry) { entry.hidden = !visible; }
      });
      matches.textContent = terms.length ? shown + " of " + ops.length + " operations" : "";
    }
    input.addEventListener("input", filter);
    input.addEventListener("keydown", function (e) {
      if (e.key === "Escape") { input.value = ""; filter(); }
    });
    document.addEventListener("keydown", function (e) {
      var t = e.target && e.target.tagName;
      if (e.key === "/" && t !== "INPUT" && t !== "TEXTAREA") {
        e.preventDefault();
        input.focus();
      }
    });
  }

  // Open every collapsed <details> around the element the URL points to.
  function revealTarget() {
    var id = window.location.hash.slice(1);
    if (!id) { return; }
    try { id = decodeURIComponent(id); } catch (e) { return; }
    var target = document.getElementById(id);
    if (!target) { return; }
    for (var n = target; n; n = n.parentElement) {
      if (n.tagName === "DETAILS") { n.open = true; }
      if (n.hidden) { n.hidden = false; }
    }
    target.scrollIntoView();
  }

  function init() {
    fillBaseURL();
    addCopyButtons();
    addTools();
    revealTarget();
    window.addEventListener("hashchange", revealTarget);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", init);
  } else {
    init();
  }
})();
