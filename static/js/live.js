// Live run view: follows /programs/P/runs/R/events (server-sent events) and
// updates the progress bar, the state badge and the log tail. When the run
// reaches a final state the page reloads once to show the verdict.
(function () {
  "use strict";

  function start(el) {
    if (!el.dataset.live || el.dataset.liveStarted || typeof EventSource === "undefined") return;
    el.dataset.liveStarted = "1";
    var source = new EventSource(el.dataset.live);
    var bar = el.querySelector("[data-progress-bar]");
    var label = el.querySelector("[data-progress-label]");
    var state = el.querySelector("[data-run-state]");
    var log = el.querySelector("[data-log]");

    source.addEventListener("progress", function (evt) {
      var p = JSON.parse(evt.data);
      if (bar) bar.style.width = Math.round(p.fraction * 100) + "%";
      if (label) label.textContent = p.label;
    });
    source.addEventListener("log", function (evt) {
      if (!log) return;
      var line = JSON.parse(evt.data);
      var div = document.createElement("div");
      div.className = line.level || "";
      div.textContent = line.text;
      log.appendChild(div);
      while (log.childNodes.length > 500) log.removeChild(log.firstChild);
      log.scrollTop = log.scrollHeight;
    });
    source.addEventListener("state", function (evt) {
      var s = JSON.parse(evt.data);
      if (state) {
        state.textContent = s.label;
        state.className = "badge " + s.state;
      }
      if (s.final) {
        source.close();
        window.location.reload();
      }
    });
  }

  function scan() { document.querySelectorAll("[data-live]").forEach(start); }
  document.addEventListener("DOMContentLoaded", scan);
  document.addEventListener("htmx:afterSettle", scan);
})();
