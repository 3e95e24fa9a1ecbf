/* global document, window, uPlot */
// The HTML report's script, inlined into the page (render.ts): draws the charts with uPlot from
// the JSON data element, shows times in the reader's zone or in UTC (the toggle), switches the
// template tabs and opens a template's drill-down. Runs in the browser; no network.
// The data is read with JSON.parse from a <script type="application/json"> element and only
// ever reaches the page as textContent or chart data, never as markup.
(function () {
  'use strict';
  var data = JSON.parse(document.getElementById('report-data').textContent);
  var meta = data.meta;
  var utc = false;
  var COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b', '#e377c2', '#17becf', '#7f7f7f', '#bcbd22'];
  var binX = [];
  for (var i = 0; i < meta.bins; i++) binX.push((meta.since + i * meta.binMs) / 1000);

  function pad(n) {
    return n < 10 ? '0' + n : String(n);
  }
  function fmtTime(ms) {
    var d = new Date(ms);
    if (utc) return d.toISOString().slice(0, 19).replace('T', ' ') + 'Z';
    var off = -d.getTimezoneOffset();
    var zone = (off >= 0 ? '+' : '-') + pad(Math.floor(Math.abs(off) / 60)) + ':' + pad(Math.abs(off) % 60);
    return (
      d.getFullYear() +
      '-' +
      pad(d.getMonth() + 1) +
      '-' +
      pad(d.getDate()) +
      ' ' +
      pad(d.getHours()) +
      ':' +
      pad(d.getMinutes()) +
      ':' +
      pad(d.getSeconds()) +
      zone
    );
  }
  function renderTimes() {
    var els = document.querySelectorAll('time[data-t]');
    for (var j = 0; j < els.length; j++) els[j].textContent = fmtTime(Number(els[j].getAttribute('data-t')));
  }

  function line(label, values, i, extra) {
    var s = { label: label, data: values, stroke: COLORS[i % COLORS.length], width: 1.5 };
    if (extra) for (var k in extra) s[k] = extra[k];
    return s;
  }
  function templateById(id) {
    var rows = data.templates.rows;
    for (var j = 0; j < rows.length; j++) if (rows[j].id === id) return rows[j];
    return null;
  }
  function checkpointX() {
    return data.checkpoints.rows.map(function (c) {
      return c.ts / 1000;
    });
  }
  function checkpointSeries(key) {
    return data.checkpoints.rows.map(function (c) {
      return c[key];
    });
  }
  var points = { points: { show: true, size: 5 } };

  var builders = {
    qps: function () {
      return { x: binX, series: [line('statements/s', data.series.qps, 0)] };
    },
    percentiles: function () {
      return { x: binX, series: [line('p50 ms', data.series.p50, 2), line('p95 ms', data.series.p95, 3), line('p99 ms', data.series.p99, 1)] };
    },
    'target-qps': function () {
      return {
        x: binX,
        series: data.targetSeries.targets.map(function (t, j) {
          return line(t, data.targetSeries.qps[j], j);
        }),
      };
    },
    errors: function () {
      var e = data.errors.series;
      return {
        x: binX,
        series: e.sqlstates.map(function (s, j) {
          return line(s === null ? '(no SQLSTATE)' : s, e.counts[j], j);
        }),
      };
    },
    locks: function () {
      return { x: binX, series: [line('lock wait messages', data.series.lockWaits, 0), line('deadlocks', data.series.deadlocks, 1)] };
    },
    blocked: function () {
      return { x: binX, series: [line('blocked sessions', data.series.blocked, 1)] };
    },
    episodes: function () {
      var eps = data.blocking.rows;
      var xs = [];
      eps.forEach(function (e) {
        xs.push(Date.parse(e.firstSeen) / 1000, Date.parse(e.lastSeen) / 1000);
      });
      xs = xs
        .filter(function (v, j, a) {
          return a.indexOf(v) === j;
        })
        .sort(function (a, b) {
          return a - b;
        });
      var series = eps.map(function (e, j) {
        var f = Date.parse(e.firstSeen) / 1000,
          l = Date.parse(e.lastSeen) / 1000;
        var ys = xs.map(function (x) {
          return x === f || x === l ? j + 1 : null;
        });
        return line('root ' + e.rootPid + ' on ' + e.target + '/' + e.instance, ys, j, { spanGaps: true, width: 6, points: { show: true, size: 8 } });
      });
      return { x: xs, series: series };
    },
    'checkpoint-times': function () {
      return {
        x: checkpointX(),
        series: [
          line('write s', checkpointSeries('writeS'), 0, points),
          line('sync s', checkpointSeries('syncS'), 1, points),
          line('total s', checkpointSeries('totalS'), 2, points),
        ],
      };
    },
    'checkpoint-wal': function () {
      var kb = { points: points.points, scale: 'kb' };
      return {
        x: checkpointX(),
        y2: 'kb',
        series: [
          line('WAL files added', checkpointSeries('walAdded'), 0, points),
          line('removed', checkpointSeries('walRemoved'), 1, points),
          line('recycled', checkpointSeries('walRecycled'), 2, points),
          line('distance kB', checkpointSeries('distanceKb'), 3, kb),
        ],
      };
    },
    maintenance: function () {
      return { x: binX, series: [line('autovacuum', data.series.autovacuum, 0), line('autoanalyze', data.series.autoanalyze, 2)] };
    },
    tempfiles: function () {
      var mb = data.series.tempBytes.map(function (b) {
        return b / 1048576;
      });
      return { x: binX, series: [line('files', data.series.tempFiles, 0), line('MB', mb, 3, { scale: 'mb' })], y2: 'mb' };
    },
    sessions: function () {
      return { x: binX, series: [line('connections', data.series.connections, 0), line('disconnections', data.series.disconnections, 1)] };
    },
    template: function (el) {
      var t = templateById(el.getAttribute('data-template'));
      if (t === null) return null;
      return { x: binX, series: [line('calls', t.series.calls, 0), line('mean ms', t.series.meanMs, 1, { scale: 'ms' })], y2: 'ms' };
    },
  };

  function countPoints(spec) {
    var n = 0;
    // Points that show something: a zero count or a missing value is not one.
    spec.series.forEach(function (s) {
      s.data.forEach(function (v) {
        if (v !== null && v !== undefined && v !== 0) n++;
      });
    });
    return n;
  }

  function draw(el) {
    var build = builders[el.getAttribute('data-chart')];
    var spec = build ? build(el) : null;
    if (spec === null) return;
    if (el._uplot) el._uplot.destroy();
    var axes = [{}, {}];
    var scales = { x: { time: true } };
    if (spec.y2) {
      axes.push({ scale: spec.y2, side: 1, grid: { show: false } });
      scales[spec.y2] = { auto: true };
    }
    var opts = {
      width: Math.max(320, el.clientWidth || 600),
      height: 220,
      scales: scales,
      axes: axes,
      tzDate: utc
        ? function (ts) {
            return uPlot.tzDate(new Date(ts * 1000), 'Etc/UTC');
          }
        : function (ts) {
            return new Date(ts * 1000);
          },
      series: [
        {
          value: function (u, ts) {
            return ts === null ? '-' : fmtTime(ts * 1000);
          },
        },
      ].concat(
        spec.series.map(function (s) {
          var o = { label: s.label, stroke: s.stroke, width: s.width, spanGaps: s.spanGaps === true };
          if (s.scale) o.scale = s.scale;
          if (s.points) o.points = s.points;
          return o;
        }),
      ),
    };
    el._uplot = new uPlot(
      opts,
      [spec.x].concat(
        spec.series.map(function (s) {
          return s.data;
        }),
      ),
      el,
    );
    el.setAttribute('data-points', String(countPoints(spec)));
  }

  function drawVisible() {
    var els = document.querySelectorAll('.chart[data-chart]');
    for (var j = 0; j < els.length; j++) if (els[j].offsetParent !== null) draw(els[j]);
  }

  function openTemplate(id) {
    var drills = document.querySelectorAll('.drill');
    for (var j = 0; j < drills.length; j++) drills[j].hidden = drills[j].getAttribute('data-template') !== id;
    var d = document.getElementById('drill-' + id);
    if (d === null) return;
    draw(d.querySelector('.chart'));
    d.scrollIntoView({ block: 'nearest' });
  }

  document.addEventListener('click', function (ev) {
    var target = ev.target;
    var tab = target.closest('.tab');
    if (tab) {
      var tabs = document.querySelectorAll('.tab');
      for (var j = 0; j < tabs.length; j++) {
        var on = tabs[j] === tab;
        tabs[j].classList.toggle('active', on);
        document.getElementById(tabs[j].getAttribute('data-tab')).hidden = !on;
      }
      return;
    }
    if (target.closest('.drill .close')) {
      target.closest('.drill').hidden = true;
      return;
    }
    var row = target.closest('.drill-row');
    if (row) openTemplate(row.getAttribute('data-template'));
  });
  document.addEventListener('keydown', function (ev) {
    var row = ev.target.closest && ev.target.closest('.drill-row');
    if (row && ev.key === 'Enter') openTemplate(row.getAttribute('data-template'));
  });
  document.getElementById('utc-toggle').addEventListener('change', function (ev) {
    utc = ev.target.checked;
    renderTimes();
    drawVisible();
  });
  window.addEventListener('resize', function () {
    drawVisible();
  });

  renderTimes();
  drawVisible();
  document.body.setAttribute('data-ready', 'true');
})();
