// perfspy flame: the single-file page. DATA holds the tree in preorder:
// names, and per node its name index, total, before, width value, depth.
(function () {
  var D = DATA, N = D.n.length, H = 17;
  var parent = new Int32Array(N), stack = [];
  for (var i = 0; i < N; i++) {
    while (stack.length > D.d[i]) stack.pop();
    parent[i] = stack.length ? stack[stack.length - 1] : -1;
    stack.push(i);
  }
  var end = new Int32Array(N); // index after node i's subtree
  for (var i = N - 1; i >= 0; i--) {
    var j = i + 1;
    while (j < N && D.d[j] > D.d[i]) j = end[j];
    end[i] = j;
  }
  function name(i) { return D.names[D.n[i]]; }
  function fmt(v) {
    if (D.scale > 1) v = +(v / D.scale).toFixed(3);
    var p = v.toString().split(".");
    p[0] = p[0].replace(/\B(?=(\d{3})+(?!\d))/g, ",");
    return p.join(".");
  }
  function describe(i, total) {
    var s = name(i) + " — ";
    if (D.diff) {
      var d = D.v[i] - D.b[i];
      s += "after " + fmt(D.v[i]) + ", before " + fmt(D.b[i]) + ", " + (d >= 0 ? "+" : "") + fmt(d) + " " + D.unit;
      if (D.b[i] > 0) s += " (" + (d >= 0 ? "+" : "") + (100 * d / D.b[i]).toFixed(1) + "%)";
      if (D.v[i] == 0) s += ", removed";
      if (D.req && D.breq) s += ", " + (D.v[i] / D.req - D.b[i] / D.breq).toFixed(2) + " per request";
      return s;
    }
    s += fmt(D.v[i]) + " " + D.unit + ", " + (100 * D.v[i] / total).toFixed(2) + "%";
    if (D.req) s += ", " + (D.v[i] / D.req).toFixed(2) + " per request";
    return s;
  }
  function hash(s) { var h = 2166136261; for (var k = 0; k < s.length; k++) { h ^= s.charCodeAt(k); h = Math.imul(h, 16777619); } return h >>> 0; }
  function pkg(n) { var sl = n.lastIndexOf("/"), dot = n.indexOf(".", sl + 1); return dot < 0 ? n : n.substring(0, dot); }
  function color(i, v, b) {
    if (D.diff) {
      if (v == 0) return "rgb(90,120,255)";
      var r = (v - b) / Math.max(v, b), c = Math.round(255 - 200 * Math.min(Math.abs(r), 1));
      return r > 0 ? "rgb(255," + c + "," + c + ")" : r < 0 ? "rgb(" + c + "," + c + ",255)" : "rgb(245,245,245)";
    }
    var h = hash(pkg(name(i))), w = hash(name(i));
    return "rgb(" + (205 + h % 50) + "," + ((h >>> 8) % 180 + w % 20) + "," + ((h >>> 16) % 55 + (w >>> 8) % 10) + ")";
  }
  // A graph: nodes (with v, b, w values), drawn on a canvas.
  function Graph(canvas, nodes, inverted) {
    this.c = canvas; this.nodes = nodes; this.inv = inverted; this.zoomed = 0; this.match = null;
    var self = this;
    canvas.addEventListener("mousemove", function (e) { self.hover(e); });
    canvas.addEventListener("mouseleave", function () { tip.style.display = "none"; });
    canvas.addEventListener("click", function (e) { var f = self.at(e); if (f) { selected = f.id; self.zoom(f.k); } });
  }
  Graph.prototype.layout = function () {
    var ns = this.nodes, W = this.c.parentNode.clientWidth || 1200, z = this.zoomed;
    var scale = (W - 2) / ns[z].w, out = [], depth0 = ns[z].d, maxd = 0;
    // Ancestors of the zoomed node span the width.
    for (var a = ns[z].p; a >= 0; a = ns[a].p) out.push({k: a, x: 0, w: W - 2, d: ns[a].d, parent: true});
    var walk = function (k, x) {
      var w = ns[k].w * scale;
      if (w < 0.3) return;
      out.push({k: k, x: x, w: w, d: ns[k].d});
      maxd = Math.max(maxd, ns[k].d);
      for (var c = 0; c < ns[k].c.length; c++) { var ch = ns[k].c[c]; walk(ch, x); x += ns[ch].w * scale; }
    };
    walk(z, 0);
    this.frames = out; this.W = W; this.Hh = (maxd + 1) * H + 4;
  };
  Graph.prototype.y = function (d) { return this.inv ? d * H + 2 : this.Hh - (d + 1) * H - 2; };
  Graph.prototype.draw = function () {
    this.layout();
    var c = this.c, g = c.getContext("2d"), dpr = window.devicePixelRatio || 1;
    c.width = this.W * dpr; c.height = this.Hh * dpr; c.style.width = this.W + "px"; c.style.height = this.Hh + "px";
    g.scale(dpr, dpr); g.font = "12px Verdana, sans-serif"; g.textBaseline = "middle";
    for (var i = 0; i < this.frames.length; i++) {
      var f = this.frames[i], n = this.nodes[f.k], y = this.y(f.d);
      g.globalAlpha = f.parent ? 0.5 : 1;
      g.fillStyle = this.match && this.match[f.k] ? "rgb(230,0,230)" : color(n.id, n.v, n.b);
      g.fillRect(f.x + 1, y, Math.max(f.w - 1, 0.5), H - 1);
      var fit = Math.floor((f.w - 6) / 7), label = name(n.id);
      if (fit >= 3) { g.fillStyle = "#000"; g.fillText(label.length <= fit ? label : label.substring(0, fit - 2) + "..", f.x + 4, y + H / 2); }
    }
    g.globalAlpha = 1;
  };
  Graph.prototype.at = function (e) {
    var r = this.c.getBoundingClientRect(), x = e.clientX - r.left, y = e.clientY - r.top;
    for (var i = this.frames.length - 1; i >= 0; i--) {
      var f = this.frames[i], fy = this.y(f.d);
      if (x >= f.x && x < f.x + f.w && y >= fy && y < fy + H) return {k: f.k, id: this.nodes[f.k].id};
    }
    return null;
  };
  Graph.prototype.hover = function (e) {
    var f = this.at(e);
    if (!f) { tip.style.display = "none"; return; }
    var n = this.nodes[f.k];
    tip.textContent = describe(n.id, this.nodes[0].v).replace(/^([^—]*)—/, name(n.id) + " —");
    if (n.v !== D.v[n.id]) tip.textContent = name(n.id) + " — " + fmt(n.v) + " " + D.unit + " here, " + (100 * n.v / this.nodes[0].v).toFixed(2) + "%";
    tip.style.display = "block"; tip.style.left = (e.clientX + 12) + "px"; tip.style.top = (e.clientY + 12) + "px";
  };
  Graph.prototype.zoom = function (k) { this.zoomed = k; this.draw(); document.body.setAttribute("data-zoomed", name(this.nodes[k].id)); };
  Graph.prototype.search = function (re) {
    var ns = this.nodes, m = {}, spans = [];
    if (re) for (var k = 0; k < ns.length; k++) if (re.test(name(ns[k].id))) m[k] = true;
    this.match = re ? m : null; this.draw();
    // Share matched: frames under a matched frame count once.
    var total = 0, skip = -1;
    for (var k = 0; k < ns.length; k++) { if (k < skip) continue; if (m[k]) { total += ns[k].w; skip = ns[k].e; } }
    return re ? 100 * total / ns[0].w : 0;
  };
  // The main tree as graph nodes (preorder, with children and subtree ends).
  var main = [];
  for (var i = 0; i < N; i++) main.push({id: i, v: D.v[i], b: D.b[i], w: D.w[i], d: D.d[i], p: parent[i], c: [], e: end[i]});
  for (var i = 1; i < N; i++) main[parent[i]].c.push(i);
  var tip = document.getElementById("tip"), selected = 0;
  document.getElementById("title").textContent = D.title;
  var G = new Graph(document.getElementById("c"), main, false);
  G.draw();
  var status = document.getElementById("status");
  function doSearch(t) {
    var pct = G.search(t ? new RegExp(t) : null);
    status.textContent = t ? "Matched: " + pct.toFixed(1) + "%" : "";
    document.body.setAttribute("data-matched", pct.toFixed(1));
  }
  document.getElementById("q").addEventListener("keydown", function (e) { if (e.key == "Enter") doSearch(this.value); });
  document.getElementById("reset").addEventListener("click", function () { G.zoom(0); });
  document.getElementById("invert").addEventListener("click", function () { G.inv = !G.inv; this.textContent = G.inv ? "Flame" : "Icicle"; G.draw(); });
  // Sandwich: the callers of a function (merged, the function at the
  // bottom) and its callees (merged subtrees), each occurrence counted once
  // even under recursion.
  function sandwich(fname) {
    var callers = [{id: -1, v: 0, b: 0, w: 0, d: 0, p: -1, c: [], e: 0, key: fname}], callees = [{id: -1, v: 0, b: 0, w: 0, d: 0, p: -1, c: [], e: 0}];
    function childOf(tree, k, id) {
      var nm = name(id);
      for (var c = 0; c < tree[k].c.length; c++) if (name(tree[tree[k].c[c]].id) == nm) return tree[k].c[c];
      tree.push({id: id, v: 0, b: 0, w: 0, d: tree[k].d + 1, p: k, c: [], e: 0}); tree[k].c.push(tree.length - 1);
      return tree.length - 1;
    }
    var first = -1;
    for (var i = 0; i < N; i++) {
      if (name(i) != fname) continue;
      var inside = false;
      for (var a = parent[i]; a >= 0; a = parent[a]) if (name(a) == fname) { inside = true; break; }
      if (inside) continue;
      if (first < 0) first = i;
      var add = function (tree, k, v, b) { tree[k].v += v; tree[k].b += b; };
      add(callers, 0, D.v[i], D.b[i]); add(callees, 0, D.v[i], D.b[i]);
      var k = 0;
      for (var a = parent[i]; a > 0; a = parent[a]) { k = childOf(callers, k, a); add(callers, k, D.v[i], D.b[i]); }
      var map = {}; map[i] = 0;
      for (var j = i + 1; j < end[i]; j++) { var kk = childOf(callees, map[parent[j]], j); map[j] = kk; add(callees, kk, D.v[j], D.b[j]); }
    }
    if (first < 0) return false;
    callers[0].id = callees[0].id = first;
    [callers, callees].forEach(function (t) { for (var k = t.length - 1; k >= 0; k--) { t[k].w = Math.max(t[k].v, 0); } });
    // Preorder with subtree ends, for search and layout.
    document.getElementById("main").style.display = "none";
    document.getElementById("sw").style.display = "";
    document.getElementById("back").style.display = "";
    document.getElementById("swtitle").textContent = "Sandwich: " + fname;
    new Graph(document.getElementById("callers"), callers, false).draw();
    new Graph(document.getElementById("callees"), callees, true).draw();
    document.body.setAttribute("data-sandwich", fname);
    return true;
  }
  document.getElementById("sandwich").addEventListener("click", function () { sandwich(name(selected)); });
  document.getElementById("back").addEventListener("click", function () {
    document.getElementById("main").style.display = ""; document.getElementById("sw").style.display = "none"; this.style.display = "none";
    document.body.removeAttribute("data-sandwich"); G.draw();
  });
  window.addEventListener("resize", function () { G.draw(); });
  // #search=RE&zoom=NAME&sandwich=NAME&icicle: the same actions from the URL.
  location.hash.slice(1).split("&").forEach(function (kv) {
    var p = kv.split("="), v = decodeURIComponent(p[1] || "");
    if (p[0] == "search") { document.getElementById("q").value = v; doSearch(v); }
    if (p[0] == "zoom") for (var k = 0; k < N; k++) if (name(k) == v) { selected = k; G.zoom(k); break; }
    if (p[0] == "icicle") document.getElementById("invert").click();
    if (p[0] == "sandwich") sandwich(v);
  });
  document.body.setAttribute("data-ready", "1");
})();
