// Live run view: follows /programs/P/runs/R/events (server-sent events) and
// updates the progress bar, the state badge, the log tail, each host's row
// of a multi-host run, the live charts of the probe's interim windows (the
// server sends each chart's ECharts option again with every new window),
// and the signed report's buttons once the report is signed. When the run
// reaches a final state the page reloads once to show the verdict; the
// reloaded page does not reload again (its state is already that one).
(function () {
  "use strict";

  function start(el) {
    if (!el.dataset.live || el.dataset.liveStarted || typeof EventSource === "undefined") return;
    el.dataset.liveStarted = "1";
    var source = new EventSource(el.dataset.live);
    var bar = el.querySelector("[data-progress-bar]");
    var label = el.querySelector("[data-progress-label]");
    // The badge is in the run's summary, beside the live panel.
    var state = document.querySelector("[data-run-state]");
    var shownState = state ? state.dataset.state : "";
    var log = el.querySelector("[data-log]");

    source.addEventListener("progress", function (evt) {
      var p = JSON.parse(evt.data);
      if (bar) bar.style.width = Math.round(p.fraction * 100) + "%";
      if (label) label.textContent = p.label;
    });
    // A multi-host run: every host's state and progress, in the hosts panel.
    source.addEventListener("hosts", function (evt) {
      JSON.parse(evt.data).forEach(function (h) {
        var row = document.querySelector('[data-host-row="' + h.ordinal + '"]');
        if (!row) return;
        var badge = row.querySelector("[data-host-state]");
        if (badge) {
          badge.textContent = h.state;
          badge.className = "badge " + h.state;
        }
        var reason = row.querySelector("[data-host-reason]");
        if (reason) reason.textContent = h.reason;
        var hbar = row.querySelector("[data-host-bar]");
        if (hbar) hbar.style.width = Math.round(h.fraction * 100) + "%";
        var hlabel = row.querySelector("[data-host-label]");
        if (hlabel) hlabel.textContent = h.label;
      });
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
        state.dataset.state = s.state;
      }
      if (s.final && s.state !== shownState) {
        source.close();
        window.location.reload();
      }
    });
    source.addEventListener("live", function (evt) { drawLive(JSON.parse(evt.data)); });
    source.addEventListener("report", function (evt) { showReport(JSON.parse(evt.data)); });
  }

  // drawLive redraws the live charts and the table of the newest windows.
  function drawLive(d) {
    var panel = document.querySelector("[data-live-numbers]");
    if (!panel) return;
    panel.hidden = false;
    var options = { ttft: d.ttft, throughput: d.throughput };
    panel.querySelectorAll("[data-live-chart]").forEach(function (chartEl) {
      var option = options[chartEl.dataset.liveChart];
      if (!option || typeof echarts === "undefined") return;
      var chart = echarts.getInstanceByDom(chartEl) || echarts.init(chartEl, null, { renderer: "canvas" });
      chart.setOption(option, { notMerge: true });
      chartEl.dataset.chartReady = "1";
      chartEl.dataset.liveWindows = String(d.windows);
    });
    var body = panel.querySelector("[data-live-table] tbody");
    if (!body) return;
    while (body.firstChild) body.removeChild(body.firstChild);
    (d.rows || []).forEach(function (row) {
      var tr = document.createElement("tr");
      row.forEach(function (cell) {
        var td = document.createElement("td");
        td.className = "num";
        td.textContent = cell;
        tr.appendChild(td);
      });
      body.appendChild(tr);
    });
  }

  // showReport adds the signed report's buttons (once).
  function showReport(r) {
    var box = document.querySelector("[data-report-buttons]");
    if (!box || box.querySelector("#download-report")) return;
    var download = document.createElement("a");
    download.className = "button";
    download.id = "download-report";
    download.href = r.download;
    download.textContent = "Signed report";
    var verify = document.createElement("a");
    verify.className = "button secondary";
    verify.id = "verify-report";
    verify.href = r.verify;
    verify.textContent = "Verify · co-sign";
    box.appendChild(download);
    box.appendChild(verify);
  }

  function scan() { document.querySelectorAll("[data-live]").forEach(start); }
  document.addEventListener("DOMContentLoaded", scan);
  document.addEventListener("htmx:afterSettle", scan);
})();
