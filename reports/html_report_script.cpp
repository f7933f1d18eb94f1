// The page script of report.html (html_report_script.hpp).
#include "reports/html_report_script.hpp"

namespace kvshift::reports {

const char* const kPageScript = R"JS(
(function () {
  const status = document.getElementById('kvshift-status');
  const fail = (why) => { status.textContent = 'charts-failed: ' + why; };
  window.addEventListener('error', (e) => fail(e.message));
  const data = JSON.parse(document.getElementById('kvshift-data').textContent);
  const palette = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd', '#8c564b', '#e377c2', '#7f7f7f'];
  const content = document.getElementById('content');
  const drawn = [];
  const el = (tag, text) => { const e = document.createElement(tag); if (text) e.textContent = text; content.appendChild(e); return e; };
  const canvas = () => { const c = el('canvas'); c.width = 1000; c.height = 360; c.className = 'chart'; return c; };
  const inked = (c) => { const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    let n = 0; for (let i = 3; i < d.length; i += 4) if (d[i] > 0) n++; return n; };
  function table(header, rows) {
    const t = el('table'); const h = t.insertRow();
    header.forEach((x) => { const th = document.createElement('th'); th.textContent = x; h.appendChild(th); });
    rows.forEach((r) => { const tr = t.insertRow(); r.forEach((x) => { tr.insertCell().textContent = x; }); });
  }
  function chart(def) {
    el('h3', def.title);
    const c = canvas();
    def.data.datasets.forEach((d, i) => {
      d.borderColor = d.backgroundColor = palette[i % palette.length];
      if (def.type === 'line') d.borderDash = [[], [8, 4], [2, 3], [10, 3, 2, 3]][i % 4];  // overlaps stay visible
    });
    const scales = { x: { type: def.xType, stacked: def.stacked, title: { display: true, text: def.xTitle } },
                     y: { stacked: def.stacked, title: { display: true, text: def.yTitle } } };
    const ch = new Chart(c, { type: def.type, data: def.data,
      options: { animation: false, responsive: false, parsing: def.xType === 'category' ? undefined : false,
                 scales: scales, plugins: { legend: { position: 'right' } } } });
    const marks = ch.data.datasets.reduce((n, d, i) =>
      n + ch.getDatasetMeta(i).data.filter((e, j) => d.data[j] !== null && !e.skip).length, 0);
    drawn.push({ title: def.title, ok: marks > 0 && inked(c) > 0 });
  }
  function heatmap(def) {
    el('h3', def.title);
    const c = canvas(); const g = c.getContext('2d');
    const L = 170, R = 150, T = 10, B = 50, W = c.width - L - R, H = c.height - T - B;
    const X = (v) => L + (v - def.xRange[0]) / (def.xRange[1] - def.xRange[0]) * W;
    const Y = (v) => T + H - (v - def.yRange[0]) / (def.yRange[1] - def.yRange[0]) * H;
    const colour = (k) => (def.categories[k] === 'tie' ? '#bbbbbb' : palette[k % palette.length]);
    def.rects.forEach(([x0, x1, y0, y1, k]) => { g.fillStyle = colour(k);
      g.fillRect(X(x0), Y(y1), X(x1) - X(x0) + 0.5, Y(y0) - Y(y1) + 0.5); });
    g.strokeStyle = '#444'; g.strokeRect(L, T, W, H); g.fillStyle = '#222'; g.font = '11px sans-serif';
    g.textAlign = 'center'; def.xTicks.forEach(([v, s]) => g.fillText(s, X(v), T + H + 14));
    g.fillText(def.xTitle, L + W / 2, T + H + 36);
    g.textAlign = 'right'; def.yTicks.forEach(([v, s]) => g.fillText(s, L - 6, Y(v) + 4));
    g.save(); g.translate(14, T + H / 2); g.rotate(-Math.PI / 2); g.textAlign = 'center';
    g.fillText(def.yTitle, 0, 0); g.restore();
    g.textAlign = 'left'; def.categories.forEach((s, k) => { g.fillStyle = colour(k);
      g.fillRect(L + W + 12, T + 8 + 18 * k, 12, 12); g.fillStyle = '#222'; g.fillText(s, L + W + 30, T + 18 + 18 * k); });
    drawn.push({ title: def.title, ok: def.rects.length > 0 && inked(c) > 0 });
  }
  try {
    if (data.run) {
      const s = data.run.summary;
      el('h2', 'Run: ' + s.scenario + ' (' + s.model + ' on ' + s.gpu + ', seed ' + s.seed + ')');
      if (s.answer) el('p', s.answer).style.fontWeight = 'bold';
      // '>': the statistic counts unfinished moves (or requests) at their lower bound.
      const f = (d, k) => (d && d[k] !== undefined ? (d.includes_lower_bounds ? '>' : '') + d[k].toFixed(3) : '-');
      const lb = (d) => (d && d.unfinished ? ' (+' + d.unfinished + ' unfinished)' : '');
      const mib = (b) => (b / 1048576).toFixed(1);
      table(['strategy', 'completed', 'failed', 'unfinished', 'recovery p50 / p99 (s)', 'migration p50 / p99 (s)',
             'fallbacks', 'KV moved (MiB)', 'replica stream (MiB)', 'predictors (MiB)', 'GPU rebuild (s)',
             'ΔNLL/move (nats/token; sources below)'],
            Object.entries(s.strategies).map(([n, v]) => [n, v.requests.completed, v.requests.failed,
              v.requests.unfinished, f(v.recovery, 'p50_s') + ' / ' + f(v.recovery, 'p99_s') + lb(v.recovery),
              f(v.migration, 'p50_s') + ' / ' + f(v.migration, 'p99_s') + lb(v.migration),
              v.moves.fallbacks, mib(v.bytes.kv), mib(v.bytes.replica_stream), mib(v.bytes.predictors),
              (v.gpu_time_s.reconstruct + v.gpu_time_s.replay).toFixed(3),
              v.quality.delta_nll_mean_per_move.toFixed(5)]));
      const byDeployment = Object.entries(s.strategies).flatMap(([n, v]) =>
        Object.entries(v.deployments || {}).map(([d, u]) => [n, d, u.model, u.requests.completed,
          u.requests.arrived, f(u.ttft, 'p50_s') + ' / ' + f(u.ttft, 'p99_s'), f(u.tpot, 'p50_s'),
          u.moves.recoveries, f(u.recovery, 'p50_s') + ' / ' + f(u.recovery, 'p99_s') + lb(u.recovery),
          u.moves.migrations, u.quality.delta_nll_mean_per_move.toFixed(5)]));
      if (byDeployment.length) {
        el('h3', 'Deployments');
        table(['strategy', 'deployment', 'model', 'completed', 'arrived', 'TTFT p50 / p99 (s)',
               'TPOT p50 (s)', 'recoveries', 'recovery p50 / p99 (s)', 'migrations', 'dNLL/move'],
              byDeployment);
      }
      const charges = [];
      const addCharges = (who, q) => {
        if (q.risk_kv_delta_nll !== undefined)
          charges.push([who, 'risk_kv', q.risk_kv_delta_nll.toFixed(5), q.risk_kv_delta_nll_source]);
        if (q.proxy_kv_delta_nll !== undefined)
          charges.push([who, 'proxy_kv', q.proxy_kv_delta_nll.toFixed(5), q.proxy_kv_delta_nll_source]);
      };
      const first = s.strategies[s.strategy_order[0]];
      addCharges('-', first.quality);
      Object.entries(first.deployments || {}).forEach(([d, u]) => addCharges(d, u.quality));
      if (charges.length) {
        el('h3', 'Where each method\'s ΔNLL per move comes from');
        table(['deployment', 'method', 'ΔNLL per move (nats/token)', 'source'], charges);
      }
      const overEps = Object.entries(s.strategies).filter(([n, v]) => v.quality.proxy_kv_moves)
        .map(([n, v]) => [n, v.quality.proxy_kv_moves,
          v.quality.proxy_kv_expected_requests_over_eps === null ? 'unknown'
            : v.quality.proxy_kv_expected_requests_over_eps.toFixed(1), v.quality.proxy_kv_over_eps_source]);
      if (overEps.length) {
        el('h3', 'ProxyKV moves and the requests expected over ε');
        table(['strategy', 'proxy_kv moves', 'expected over ε', 'source'], overEps);
      }
      if (s.cost_sources) {
        el('h3', 'Where the GPU durations came from');
        table(['op', 'source', 'shapes measured live', 'spread (p90-p10)/median'],
              Object.entries(s.cost_sources).map(([op, c]) => [op, c.source,
                c.live_measurements !== undefined ? c.live_measurements : '-',
                c.spread !== undefined ? (100 * c.spread).toFixed(1) + ' %' : '-']));
      }
      data.run.notes.forEach((n) => el('p', n));
      data.run.charts.forEach(chart);
    }
    if (data.sweep) {
      el('h2', 'Sweep');
      data.sweep.lines.forEach(chart);
      data.sweep.heatmaps.forEach(heatmap);
      data.sweep.notes.forEach((n) => el('p', n));
      el('h3', 'sweep.csv (first 200 rows)');
      table(data.sweep.table.header, data.sweep.table.rows);
    }
    if (data.analytic) { el('h2', 'Analytic crossover maps'); data.analytic.heatmaps.forEach(heatmap); }
    const bad = drawn.filter((d) => !d.ok).map((d) => d.title);
    if (bad.length) fail('no marks in ' + bad.join('; '));
    else { status.textContent = 'charts-ok ' + drawn.length; status.dataset.charts = drawn.length; }
  } catch (e) { fail(e && e.message ? e.message : String(e)); }
})();
)JS";

}  // namespace kvshift::reports
