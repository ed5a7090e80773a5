// perfspy flame: search and click-to-zoom for the SVG.
var frames, details, searchBtn, matchedTxt, unzoomBtn, W;
function init(evt) {
  frames = document.getElementById("frames");
  details = document.getElementById("details").firstChild;
  searchBtn = document.getElementById("search");
  matchedTxt = document.getElementById("matched");
  unzoomBtn = document.getElementById("unzoom");
  W = parseFloat(document.documentElement.getAttribute("width"));
  var gs = frames.getElementsByTagName("g");
  for (var i = 0; i < gs.length; i++) {
    var r = gs[i].getElementsByTagName("rect")[0];
    r.setAttribute("data-x", r.getAttribute("x"));
    r.setAttribute("data-w", r.getAttribute("width"));
    r.setAttribute("data-fill", r.getAttribute("fill"));
  }
  frames.addEventListener("click", function (e) { var g = e.target.closest("g"); if (g) zoom(g); });
  frames.addEventListener("mouseover", function (e) { var g = e.target.closest("g"); if (g) details.nodeValue = title(g); });
  frames.addEventListener("mouseout", function () { details.nodeValue = " "; });
  searchBtn.addEventListener("click", function () { var t = prompt("Search for (regexp):", ""); if (t != null) search(t); });
  unzoomBtn.addEventListener("click", unzoom);
  var h = location.hash.slice(1).split("&");
  for (var k = 0; k < h.length; k++) {
    var kv = h[k].split("=");
    if (kv[0] == "search") search(decodeURIComponent(kv[1]));
    if (kv[0] == "zoom") { var z = find(decodeURIComponent(kv[1])); if (z) zoom(z); }
  }
}
function title(g) { return g.getElementsByTagName("title")[0].textContent; }
function name(g) { return g.getAttribute("data-name"); }
function find(n) {
  var gs = frames.getElementsByTagName("g");
  for (var i = 0; i < gs.length; i++) if (name(gs[i]) == n) return gs[i];
  return null;
}
function label(g) {
  var r = g.getElementsByTagName("rect")[0], t = g.getElementsByTagName("text")[0];
  var w = parseFloat(r.getAttribute("width")), n = name(g), fit = Math.floor((w - 6) / 7);
  t.setAttribute("x", parseFloat(r.getAttribute("x")) + 3);
  t.textContent = fit < 3 ? "" : (n.length <= fit ? n : n.substring(0, fit - 2) + "..");
}
function zoom(g) {
  var r = g.getElementsByTagName("rect")[0];
  var x0 = parseFloat(r.getAttribute("data-x")), w0 = parseFloat(r.getAttribute("data-w"));
  var y0 = parseFloat(r.getAttribute("y")), M = 10, s = (W - 2 * M) / w0;
  var gs = frames.getElementsByTagName("g");
  for (var i = 0; i < gs.length; i++) {
    var ri = gs[i].getElementsByTagName("rect")[0];
    var x = parseFloat(ri.getAttribute("data-x")), w = parseFloat(ri.getAttribute("data-w"));
    var inside = x >= x0 - 0.0001 && x + w <= x0 + w0 + 0.0001;
    var below = parseFloat(ri.getAttribute("y")) * FLIP >= y0 * FLIP;
    if (inside || (below && x <= x0 && x + w >= x0 + w0)) {
      var nx = inside ? M + (x - x0) * s : M, nw = inside ? w * s : W - 2 * M;
      ri.setAttribute("x", nx); ri.setAttribute("width", nw);
      gs[i].style.display = ""; gs[i].classList.toggle("parent", !inside);
      label(gs[i]);
    } else gs[i].style.display = "none";
  }
  unzoomBtn.classList.remove("hide");
  document.documentElement.setAttribute("data-zoomed", name(g));
}
function unzoom() {
  var gs = frames.getElementsByTagName("g");
  for (var i = 0; i < gs.length; i++) {
    var r = gs[i].getElementsByTagName("rect")[0];
    r.setAttribute("x", r.getAttribute("data-x")); r.setAttribute("width", r.getAttribute("data-w"));
    gs[i].style.display = ""; gs[i].classList.remove("parent"); label(gs[i]);
  }
  unzoomBtn.classList.add("hide");
  document.documentElement.removeAttribute("data-zoomed");
}
function search(term) {
  var re = new RegExp(term), gs = frames.getElementsByTagName("g"), spans = [];
  for (var i = 0; i < gs.length; i++) {
    var r = gs[i].getElementsByTagName("rect")[0];
    if (term !== "" && re.test(name(gs[i]))) {
      r.setAttribute("fill", "rgb(230,0,230)");
      spans.push([parseFloat(r.getAttribute("data-x")), parseFloat(r.getAttribute("data-w"))]);
    } else r.setAttribute("fill", r.getAttribute("data-fill"));
  }
  // Matched share: the union of the matching frames' spans, nested ones once.
  spans.sort(function (a, b) { return a[0] - b[0]; });
  var total = 0, end = -1;
  for (var j = 0; j < spans.length; j++) {
    var s = spans[j][0], e = s + spans[j][1];
    if (e <= end) continue;
    total += e - Math.max(s, end); end = e;
  }
  var pct = (100 * total / (W - 20)).toFixed(1);
  matchedTxt.textContent = term === "" ? "" : "Matched: " + pct + "%";
  document.documentElement.setAttribute("data-matched", pct);
}
