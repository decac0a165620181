// Small enhancements; every page works without them.
(function () {
  "use strict";
  function wire(root) {
    root.querySelectorAll("input.select-all").forEach(function (box) {
      box.hidden = false;
      box.addEventListener("change", function () {
        var form = box.closest("form");
        form.querySelectorAll('input[name="ids"]').forEach(function (each) {
          each.checked = box.checked;
        });
      });
    });
  }
  document.addEventListener("DOMContentLoaded", function () { wire(document); });
  document.addEventListener("htmx:afterSwap", function (event) { wire(event.target); });
})();
