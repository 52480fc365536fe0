// Small behaviours shared by all pages, without inline script.
(function () {
  "use strict";

  // <form data-confirm="Really cancel this run?">: ask before submitting.
  document.addEventListener("submit", function (evt) {
    var form = evt.target;
    if (form.dataset && form.dataset.confirm && !window.confirm(form.dataset.confirm)) {
      evt.preventDefault();
      evt.stopImmediatePropagation();
    }
  }, true);

  // <button data-copy="#id">: copy the element's text to the clipboard.
  document.addEventListener("click", function (evt) {
    var btn = evt.target.closest("[data-copy]");
    if (!btn) return;
    var el = document.querySelector(btn.dataset.copy);
    if (!el || !navigator.clipboard) return;
    navigator.clipboard.writeText(el.textContent.trim()).then(function () {
      var old = btn.textContent;
      btn.textContent = "Copied";
      setTimeout(function () { btn.textContent = old; }, 1500);
    });
  });

  // <select data-submit-on-change>: submit the form when the choice changes (filters).
  document.addEventListener("change", function (evt) {
    var el = evt.target;
    if (el.matches && el.matches("[data-submit-on-change]") && el.form) el.form.requestSubmit();
  });
})();
