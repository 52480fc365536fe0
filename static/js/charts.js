// Draws every chart on the page. Each chart is a <div data-chart="ID"> with
// its ECharts option as JSON in <script type="application/json" id="ID">,
// written by the server (no inline script, so the strict CSP holds). Runs
// on load and after every htmx swap; charts whose element left the page are
// disposed.
(function () {
  "use strict";

  function initCharts(root) {
    if (typeof echarts === "undefined") {
      console.warn("accord: ECharts is not loaded; charts stay as tables");
      return;
    }
    root.querySelectorAll("[data-chart]").forEach(function (el) {
      if (el.dataset.chartReady) return;
      var source = document.getElementById(el.dataset.chart);
      if (!source) return;
      var option;
      try {
        option = JSON.parse(source.textContent);
      } catch (e) {
        console.warn("accord: chart " + el.dataset.chart + " has no valid option");
        return;
      }
      var chart = echarts.init(el, null, { renderer: "canvas" });
      chart.on("finished", function () { el.dataset.chartDrawn = "1"; });
      chart.setOption(option);
      el.dataset.chartReady = "1";
    });
  }

  function disposeCharts(root) {
    if (typeof echarts === "undefined") return;
    root.querySelectorAll("[data-chart-ready]").forEach(function (el) {
      var chart = echarts.getInstanceByDom(el);
      if (chart) chart.dispose();
    });
  }

  document.addEventListener("DOMContentLoaded", function () { initCharts(document); });
  document.addEventListener("htmx:beforeSwap", function (evt) { disposeCharts(evt.detail.target); });
  document.addEventListener("htmx:afterSettle", function (evt) { initCharts(evt.detail.target || document); });

  var resizeTimer;
  window.addEventListener("resize", function () {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(function () {
      if (typeof echarts === "undefined") return;
      document.querySelectorAll("[data-chart-ready]").forEach(function (el) {
        var chart = echarts.getInstanceByDom(el);
        if (chart) chart.resize();
      });
    }, 150);
  });
})();
