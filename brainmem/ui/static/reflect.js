// Progress of a reflect started from this page: polls /api/reflect until it is done,
// then reloads the log (which shows the last reflect's result).
(function () {
  var box = document.getElementById("progress");
  if (!box || box.dataset.running !== "yes") return;
  function poll() {
    fetch("/api/reflect", {credentials: "same-origin"}).then(function (r) { return r.json(); })
      .then(function (job) {
        if (job.running) {
          box.textContent = "Reflect running: " + job.step + " (" + job.done + "/" + job.total + ")";
          var bar = document.createElement("progress");
          bar.max = job.total || 1; bar.value = job.done;
          box.appendChild(bar);
          setTimeout(poll, 300);
        } else {  // the log shows how the last reflect ended, its error if it failed
          window.location.href = "/log";
        }
      }).catch(function () { setTimeout(poll, 1000); });
  }
  poll();
})();
