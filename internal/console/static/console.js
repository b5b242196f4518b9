// ledgerq console: refreshes the overview's counts without reloading the
// page. Everything else works without JavaScript.
(function () {
  "use strict";
  var counts = document.querySelectorAll("[data-count]");
  if (!counts.length) return;
  var refreshed = document.getElementById("refreshed");
  var period = 2000;

  function rough(ms) {
    var s = Math.floor(ms / 1000);
    if (s < 1) return "just now";
    if (s < 60) return s + "s ago";
    if (s < 3600) return Math.floor(s / 60) + "m " + (s % 60) + "s ago";
    return Math.floor(s / 3600) + "h " + Math.floor((s % 3600) / 60) + "m ago";
  }

  function apply(data) {
    var now = Date.parse(data.at);
    counts.forEach(function (el) {
      var v = data.counts[el.getAttribute("data-count")];
      var text = String(v === undefined ? 0 : v);
      if (el.textContent !== text) {
        el.textContent = text;
        el.classList.remove("changed");
        void el.offsetWidth;
        el.classList.add("changed");
      }
    });
    document.querySelectorAll("[data-oldest]").forEach(function (el) {
      var t = data.oldest[el.getAttribute("data-oldest")];
      el.textContent = t ? rough(now - Date.parse(t)) : "none";
    });
    if (refreshed) refreshed.textContent = "as of " + data.at.replace("T", " ").replace(/\.\d+/, "").replace("Z", "");
  }

  function tick() {
    fetch("/ui/overview.json", { headers: { Accept: "application/json" }, credentials: "same-origin" })
      .then(function (r) {
        if (r.status === 401) { window.location = "/ui/login?next=/ui/"; throw new Error("logged out"); }
        if (!r.ok) throw new Error("HTTP " + r.status);
        return r.json();
      })
      .then(function (data) { apply(data); setTimeout(tick, period); })
      .catch(function (err) {
        if (refreshed) refreshed.textContent = "not refreshed: " + err.message + " (retrying)";
        setTimeout(tick, period * 3);
      });
  }
  setTimeout(tick, period);
})();
