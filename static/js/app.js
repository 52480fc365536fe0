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

  // <button data-signin-as="email" data-signin-password="#id">: fill the
  // sign-in form with a demo account (the password is the element's text).
  document.addEventListener("click", function (evt) {
    var btn = evt.target.closest("[data-signin-as]");
    if (!btn) return;
    var email = document.getElementById("email");
    var password = document.getElementById("password");
    var secret = document.querySelector(btn.dataset.signinPassword);
    if (!email || !password || !secret) return;
    email.value = btn.dataset.signinAs;
    password.value = secret.textContent.trim();
    password.focus();
  });

  // <select data-submit-on-change>: submit the form when the choice changes (filters).
  document.addEventListener("change", function (evt) {
    var el = evt.target;
    if (el.matches && el.matches("[data-submit-on-change]") && el.form) el.form.requestSubmit();
  });
})();

// Tabs that switch sections of one page (<a data-tab="yaml">) without a
// reload; the links still work without JavaScript.
(function () {
  "use strict";
  document.addEventListener("click", function (evt) {
    var tab = evt.target.closest("a[data-tab]");
    if (!tab) return;
    var target = document.getElementById(tab.dataset.tab);
    if (!target) return;
    evt.preventDefault();
    tab.parentElement.querySelectorAll("a[data-tab]").forEach(function (a) {
      a.classList.toggle("active", a === tab);
      var section = document.getElementById(a.dataset.tab);
      if (section) section.classList.toggle("hidden", a !== tab);
    });
  });
})();
