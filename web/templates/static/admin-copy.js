// Copy buttons of the admin pages (web/templates/admin_manage.templ): a
// <button data-copy="ID" hidden> copies the value of the field ID (a client
// key shown once, the redirect URI to register at a provider). A file, not
// an inline script: the Content-Security-Policy allows scripts from 'self'
// only. Without JavaScript the buttons stay hidden; the read-only field can
// be selected and copied by hand.
(function () {
  "use strict";
  function copied(button) {
    button.textContent = "Copied";
    setTimeout(function () { button.textContent = "Copy"; }, 2000);
  }
  function copy(button) {
    var field = document.getElementById(button.getAttribute("data-copy"));
    if (!field) {
      return;
    }
    var text = field.value;
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(function () { copied(button); }, function () {
        field.focus();
        field.select();
      });
      return;
    }
    field.focus();
    field.select();
    if (document.execCommand && document.execCommand("copy")) {
      copied(button);
    }
  }
  document.querySelectorAll("button[data-copy]").forEach(function (button) {
    button.hidden = false;
    button.addEventListener("click", function () { copy(button); });
  });
})();
