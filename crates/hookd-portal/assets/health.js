// hookd portal: delivery health at a glance.
//
// Draws what GET …/endpoint/{ep}/health answers: attempts by outcome and deliveries still
// waiting, per hour over the last day and per six hours over the last week, as stacked bars in
// an SVG made here (no chart library). Every chart has its numbers beside it: the totals in its
// legend, and each bar's counts in a table that screen readers read (and anyone can open).
// Uses portal.js's helpers (h, time, percent, enc); loaded before it.
'use strict';

const SVG_NS = 'http://www.w3.org/2000/svg';

/** The three series, bottom to top, with their words and colour class. */
const SERIES = [
  ['success', 'succeeded', 'ok'],
  ['failure', 'failed', 'bad'],
  ['pending', 'waiting', 'wait'],
];

function svg(tag, attrs, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [name, value] of Object.entries(attrs || {})) el.setAttribute(name, String(value));
  for (const child of children.flat()) if (child) el.append(child);
  return el;
}

/** "14:00" for an hourly bucket, "Tue 18:00" for a six-hourly one, in the visitor's time. */
function bucketLabel(iso, bucketSeconds) {
  const date = new Date(iso);
  const hour = date.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
  if (bucketSeconds < 6 * 3600) return hour;
  return `${date.toLocaleDateString([], { weekday: 'short' })} ${hour}`;
}

function bucketTotal(bucket) {
  return bucket.success + bucket.failure + bucket.pending;
}

/** What a period's counts add up to, in words. */
function periodSentence(period) {
  const failed = period.attempts - period.successfulAttempts;
  return `${period.successfulAttempts} succeeded, ${failed} failed, ${period.pending} waiting`;
}

/** The stacked bars of one period; the SVG's own title says the totals. */
function barChart(period, title) {
  const buckets = period.buckets;
  const highest = Math.max(1, ...buckets.map(bucketTotal));
  const width = buckets.length * 10;
  const titleId = uid('chart');
  const bars = buckets.map((bucket, i) => {
    let y = 100;
    const rects = SERIES.map(([key, , kind]) => {
      const height = (bucket[key] / highest) * 96;
      y -= height;
      return height > 0 ? svg('rect', { class: `bar ${kind}`, x: i * 10 + 1, y, width: 8, height }) : null;
    });
    const label = `${bucketLabel(bucket.start, period.bucketSeconds)}: ${bucket.success} succeeded, ${bucket.failure} failed, ${bucket.pending} waiting`;
    return svg('g', {}, svg('title', {}, label), svg('rect', { class: 'slot', x: i * 10, y: 0, width: 10, height: 100 }), rects);
  });
  const grid = [25, 50, 75].map((y) => svg('line', { class: 'grid', x1: 0, x2: width, y1: y, y2: y }));
  const chart = svg('svg', {
    class: 'chart', viewBox: `0 0 ${width} 100`, preserveAspectRatio: 'none',
    role: 'img', 'aria-labelledby': titleId, focusable: 'false',
  }, svg('title', { id: titleId }, `${title}: ${periodSentence(period)}`), grid, bars);
  const first = buckets[0];
  const middle = buckets[Math.floor(buckets.length / 2)];
  return h('figure', { class: 'chart-box' },
    h('figcaption', {}, title),
    h('div', { class: 'chart-frame' },
      h('span', { class: 'chart-max', 'aria-hidden': 'true' }, String(highest)),
      chart),
    h('div', { class: 'chart-axis', 'aria-hidden': 'true' },
      h('span', {}, bucketLabel(first.start, period.bucketSeconds)),
      h('span', {}, bucketLabel(middle.start, period.bucketSeconds)),
      h('span', {}, 'now')),
    legend(period),
    numbersTable(period, title));
}

function legend(period) {
  const failed = period.attempts - period.successfulAttempts;
  const values = { success: period.successfulAttempts, failure: failed, pending: period.pending };
  return h('ul', { class: 'legend' }, SERIES.map(([key, words, kind]) =>
    h('li', {}, h('span', { class: `swatch ${kind}`, 'aria-hidden': 'true' }), `${values[key]} ${words}`)));
}

/** Every bar's counts, for screen readers and for anyone who wants the exact figures. */
function numbersTable(period, title) {
  const rows = period.buckets.map((bucket) => h('tr', {},
    h('th', { scope: 'row' }, time(bucket.start)),
    h('td', {}, bucket.success), h('td', {}, bucket.failure), h('td', {}, bucket.pending)));
  return h('details', { class: 'numbers' }, h('summary', {}, 'The numbers'),
    h('div', { class: 'table-wrap' }, h('table', {},
      h('caption', {}, `${title}, oldest first`),
      h('thead', {}, h('tr', {}, ['From', 'Succeeded', 'Failed', 'Waiting'].map((t) => h('th', { scope: 'col' }, t)))),
      h('tbody', {}, rows))));
}

/** The engine's adaptive limit and what is in flight now, in words. */
function concurrencyText(health) {
  const ceiling = health.maxConcurrency ? ` (ceiling ${health.maxConcurrency})` : '';
  if (health.concurrencyLimit === null || health.concurrencyLimit === undefined) {
    return `Idle: nothing queued in this server${ceiling}`;
  }
  return `${health.inFlight} in flight of ${health.concurrencyLimit} allowed now${ceiling}`;
}

function oldestText(health, appId) {
  const oldest = health.oldestPending;
  if (!oldest) return 'Nothing is waiting';
  return [h('a', { class: 'mono', href: `#/app/${enc(appId)}/msg/${enc(oldest.msgId)}` }, oldest.msgId),
    ', created ', time(oldest.createdAt)];
}

/** The figures and charts of one endpoint's (or destination's) health. */
function healthView(health, appId) {
  const stat = (label, value, kind) => h('div', { class: kind || null }, h('dt', {}, label), h('dd', {}, value));
  const state = health.disabled
    ? ['Disabled', health.disabledReason ? `: ${health.disabledReason}` : '', health.disabledAt ? [' (since ', time(health.disabledAt), ')'] : '']
    : 'Enabled';
  return h('section', { class: 'health', 'aria-label': 'Delivery health' },
    h('dl', { class: 'stats' },
      stat('Success rate, 24 hours', percent(health.day.successRate), figure(rateKind(health.day.successRate))),
      stat('Success rate, 7 days', percent(health.week.successRate), figure(rateKind(health.week.successRate))),
      stat('Attempts, 24 hours', health.day.attempts, figure(null)),
      stat('Sending now', concurrencyText(health)),
      stat('Oldest waiting message', oldestText(health, appId)),
      stat('Status', state, health.disabled ? 'bad' : null)),
    h('div', { class: 'charts' },
      barChart(health.day, 'Attempts per hour, last 24 hours'),
      barChart(health.week, 'Attempts per 6 hours, last 7 days')));
}

/** The class of a stat that is one big number, coloured as `kind`. */
function figure(kind) {
  return kind ? `figure ${kind}` : 'figure';
}

/** A success rate's colour: good from 99%, bad below 90%. */
function rateKind(rate) {
  if (rate === null || rate === undefined) return null;
  return rate >= 0.99 ? 'ok' : rate < 0.9 ? 'bad' : 'wait';
}

/** The health of each of an application's endpoints, or null for one the API refused. */
async function endpointsHealth(appId, endpoints) {
  return Promise.all(endpoints.map(async (ep) => {
    try {
      return await get(`/app/${enc(appId)}/endpoint/${enc(ep.id)}/health`);
    } catch (error) {
      if (error.status === 401) throw error;
      return null;
    }
  }));
}

/** Sums the day windows of many endpoints into one, bucket by bucket. */
function sumDays(healths) {
  const days = healths.filter(Boolean).map((hl) => hl.day);
  if (days.length === 0) return null;
  const total = { ...days[0], attempts: 0, successfulAttempts: 0, pending: 0 };
  total.buckets = days[0].buckets.map((b) => ({ start: b.start, success: 0, failure: 0, pending: 0 }));
  for (const day of days) {
    total.attempts += day.attempts;
    total.successfulAttempts += day.successfulAttempts;
    total.pending += day.pending;
    day.buckets.forEach((b, i) => {
      const into = total.buckets[i];
      if (!into) return;
      into.success += b.success;
      into.failure += b.failure;
      into.pending += b.pending;
    });
  }
  total.successRate = total.attempts ? total.successfulAttempts / total.attempts : null;
  return total;
}

/** The application's summary: its endpoints' last day added up. */
function appHealthView(endpoints, healths) {
  const day = sumDays(healths);
  const disabled = endpoints.filter((ep) => ep.disabled).length;
  const stat = (label, value, kind) => h('div', { class: kind || null }, h('dt', {}, label), h('dd', {}, value));
  return h('section', { class: 'health', 'aria-label': 'Delivery health of this application' },
    h('dl', { class: 'stats' },
      stat('Endpoints', `${endpoints.length - disabled} enabled, ${disabled} disabled`, disabled ? 'wait' : null),
      stat('Success rate, 24 hours', day ? percent(day.successRate) : '—', figure(day ? rateKind(day.successRate) : null)),
      stat('Attempts, 24 hours', day ? day.attempts : 0, figure(null)),
      stat('Waiting now', day ? day.pending : 0, figure(null))),
    day ? h('div', { class: 'charts' }, barChart(day, 'Attempts per hour to every endpoint, last 24 hours')) : null);
}

/** A small success-rate cell for an endpoint's row: its day's rate and a tiny bar strip. */
function healthCell(health) {
  if (!health) return '—';
  const day = health.day;
  const highest = Math.max(1, ...day.buckets.map(bucketTotal));
  const strip = svg('svg', { class: 'spark', viewBox: `0 0 ${day.buckets.length * 4} 20`, preserveAspectRatio: 'none', 'aria-hidden': 'true', focusable: 'false' },
    day.buckets.map((b, i) => {
      const total = bucketTotal(b);
      if (!total) return null;
      const kind = b.failure ? 'bad' : b.pending ? 'wait' : 'ok';
      const height = Math.max(2, (total / highest) * 20);
      return svg('rect', { class: `bar ${kind}`, x: i * 4, y: 20 - height, width: 3, height });
    }));
  return h('span', { class: 'spark-cell' }, strip,
    h('span', { class: `badge ${rateKind(day.successRate) || 'wait'}` }, percent(day.successRate)),
    ` ${day.attempts} attempts`);
}
