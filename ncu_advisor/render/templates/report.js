/* ncu-advise report: sortable and filterable tables, print support. No libraries. */
(function () {
  "use strict";

  /* A cell's sort key: its data-sort number when given ("" sorts last), else its text. */
  function key(cell) {
    var s = cell ? cell.getAttribute("data-sort") : null;
    if (s !== null) { return s === "" ? null : parseFloat(s); }
    return cell ? cell.textContent.trim().toLowerCase() : null;
  }

  function makeSortable(table) {
    var heads = table.tHead.rows[0].cells;
    Array.prototype.forEach.call(heads, function (th, col) {
      if (th.classList.contains("nosort")) { return; }
      th.tabIndex = 0;
      if (!th.hasAttribute("aria-sort")) { th.setAttribute("aria-sort", "none"); }
      function sort() {
        var dir = th.getAttribute("aria-sort") === "ascending" ? -1 : 1;
        Array.prototype.forEach.call(heads, function (h) {
          if (h.hasAttribute("aria-sort")) { h.setAttribute("aria-sort", "none"); }
        });
        th.setAttribute("aria-sort", dir === 1 ? "ascending" : "descending");
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (a, b) {
          var x = key(a.cells[col]), y = key(b.cells[col]);
          if (x === null || y === null) { return (x === null) - (y === null); }
          if (typeof x === "number" && typeof y === "number") { return (x - y) * dir; }
          return String(x).localeCompare(String(y)) * dir;
        });
        rows.forEach(function (r) { body.appendChild(r); });
      }
      th.addEventListener("click", sort);
      th.addEventListener("keydown", function (e) {
        if (e.key === "Enter" || e.key === " ") { e.preventDefault(); sort(); }
      });
    });
  }

  function makeFilter(box) {
    var table = document.getElementById(box.getAttribute("data-filter"));
    if (!table) { return; }
    var text = box.querySelector("input");
    var level = box.querySelector("select");
    var count = box.querySelector(".count");
    function apply() {
      var q = text ? text.value.trim().toLowerCase() : "";
      var max = level && level.value !== "" ? parseInt(level.value, 10) : null;
      var rows = table.tBodies[0].rows, shown = 0;
      for (var i = 0; i < rows.length; i++) {
        var r = rows[i];
        var ok = (!q || r.textContent.toLowerCase().indexOf(q) >= 0) &&
          (max === null || parseInt(r.getAttribute("data-sevorder"), 10) <= max);
        r.hidden = !ok;
        if (ok) { shown++; }
      }
      if (count) { count.textContent = "showing " + shown + " of " + rows.length; }
    }
    if (text) { text.addEventListener("input", apply); }
    if (level) { level.addEventListener("change", apply); }
    apply();
  }

  document.querySelectorAll("table.sortable").forEach(makeSortable);
  document.querySelectorAll("[data-filter]").forEach(makeFilter);

  /* Roofline points jump to their kernel's section. */
  document.querySelectorAll("svg.roofline .rl-pt").forEach(function (g) {
    g.addEventListener("click", function () {
      location.hash = "k-" + g.getAttribute("data-kernel");
    });
  });

  /* Print everything (except raw-metric appendices too long for paper): open the collapsed
     parts, close them again afterwards. */
  var opened = [];
  window.addEventListener("beforeprint", function () {
    document.querySelectorAll("details:not([open]):not(.noprint)").forEach(function (d) {
      d.open = true;
      opened.push(d);
    });
  });
  window.addEventListener("afterprint", function () {
    opened.forEach(function (d) { d.open = false; });
    opened = [];
  });
}());
