// hookd portal: the ingest gateway's pages.
//
// Ingest sources (hookd receiving providers' webhooks) get their own pages: the list of
// sources (admins), and a source's page: its forwarding endpoints, the requests it accepted
// (each linked to its message, whose page shows the forwarding attempts) and the requests it
// refused. They use portal.js's helpers (h, get, page, table, time, pager, …) and are reached
// through its router (`renderIngest`) and its app-scoped home (`ingestHome`).
'use strict';

// The ingest API is served beside /api/v1, not under it: `get` prefixes /api/v1, and the URL
// parser resolves the dot segments, so these paths reach /ingest/api/v1.
const INGEST = '/../../ingest/api/v1';
// A source's own application has this uid followed by the source id.
const INGEST_APP_PREFIX = 'hookd-ingest-';

/** Renders `#/sources` or `#/source/{id}`; false for any other page. */
async function renderIngest(parts, params) {
  if (parts[0] === 'sources' && parts.length === 1) {
    await renderSources(params);
  } else if (parts[0] === 'source' && parts.length === 2) {
    await renderSource(parts[1], params);
  } else {
    return false;
  }
  return true;
}

/** The home of an app-scoped session: its source's page when its application is a source's. */
async function ingestHome(appId) {
  const app = await get(`/app/${enc(appId)}`);
  const uid = app.uid || '';
  return uid.startsWith(INGEST_APP_PREFIX)
    ? `#/source/${enc(uid.slice(INGEST_APP_PREFIX.length))}`
    : `#/app/${enc(appId)}`;
}

function sourceCrumbs(extra) {
  return session.scope === 'admin' ? [h('a', { href: '#/sources' }, 'Sources'), extra ? [' / ', extra] : null] : null;
}

async function renderSources(params) {
  const list = await get(`${INGEST}/source${query({ limit: PAGE_SIZE, iterator: params.get('iterator') })}`);
  const rows = list.data.map((source) => h('tr', {},
    h('td', {}, h('a', { href: `#/source/${enc(source.id)}` }, source.name)),
    h('td', { class: 'mono' }, source.type),
    h('td', {}, source.uid || '—'),
    h('td', { class: 'id' }, source.id),
    h('td', {}, time(source.createdAt))));
  page('Ingest sources', null,
    h('p', {}, 'Each source receives one provider\'s webhooks, checks their signatures, and forwards them to its endpoints.'),
    table('Ingest sources, oldest first', ['Name', 'Type', 'UID', 'Id', 'Created'], rows, 'No ingest sources yet.'),
    pager(list, params, (iterator) => `#/sources${query({ iterator })}`));
}

async function renderSource(sourceId, params) {
  const appRef = `${INGEST_APP_PREFIX}${sourceId}`;
  const base = `${INGEST}/source/${enc(sourceId)}`;
  const [source, endpoints, requests, rejections] = await Promise.all([
    session.scope === 'admin' ? get(base) : null,
    get(`${base}/endpoint?limit=250`),
    get(`${base}/request${query({ limit: PAGE_SIZE, iterator: params.get('iterator') })}`),
    get(`${base}/rejection?limit=100`),
  ]);
  const title = source ? source.name : 'Ingest source';
  page(title, sourceCrumbs(title),
    source ? sourceFacts(source) : null,
    h('h2', {}, 'Forwarded to'),
    forwardTable(appRef, endpoints.data),
    h('h2', { id: 'accepted' }, 'Accepted requests'),
    acceptedTable(appRef, requests.data),
    pager(requests, params, (iterator) => `#/source/${enc(sourceId)}${query({ iterator })}`),
    h('h2', { id: 'refused' }, 'Refused requests'),
    h('p', {}, 'Requests whose signature did not check out: never stored, never forwarded. The newest 100 are kept, without their body.'),
    refusedTable(rejections.data));
}

function sourceFacts(source) {
  return h('dl', { class: 'facts' },
    h('dt', {}, 'Source id'), h('dd', { class: 'mono' }, source.id),
    h('dt', {}, 'Type'), h('dd', { class: 'mono' }, source.type),
    h('dt', {}, 'Receives at'), h('dd', { class: 'mono' }, source.ingestUrl),
    source.uid ? [h('dt', {}, 'UID'), h('dd', { class: 'mono' }, source.uid)] : null);
}

function forwardTable(appRef, endpoints) {
  const rows = endpoints.map((ep) => h('tr', {},
    h('td', {}, h('a', { href: `#/app/${enc(appRef)}/endpoint/${enc(ep.id)}` }, ep.url)),
    h('td', {}, endpointState(ep)),
    h('td', {}, ep.eventTypes && ep.eventTypes.length ? ep.eventTypes.join(', ') : 'All event types')));
  return table('Where this source forwards', ['URL', 'Status', 'Event types'], rows,
    'This source forwards nowhere yet: add an endpoint.');
}

function acceptedTable(appRef, requests) {
  const rows = requests.map((request) => h('tr', {},
    h('td', {}, h('a', { href: `#/app/${enc(appRef)}/msg/${enc(request.msgId)}` }, time(request.timestamp))),
    h('td', { class: 'mono' }, request.eventType),
    h('td', { class: 'mono' }, request.eventId || '—'),
    h('td', { class: 'mono' }, Object.entries(request.headers).map(([name, value]) => `${name}: ${value}`).join('; ')),
    h('td', {}, request.remoteAddr || '—')));
  return table('Requests this source accepted, newest first; each links to its forwarding attempts',
    ['Received', 'Event type', 'Event id', 'Headers kept', 'From'], rows, 'No request accepted yet.');
}

function refusedTable(rejections) {
  const rows = rejections.map((rejection) => h('tr', {},
    h('td', {}, time(rejection.timestamp)),
    h('td', {}, h('span', { class: 'badge bad' }, rejection.reason)),
    h('td', {}, rejection.detail),
    h('td', { class: 'mono' }, rejection.headerNames.join(', ')),
    h('td', {}, rejection.remoteAddr || '—')));
  return table('Requests this source refused, newest first', ['Received', 'Reason', 'Why', 'Header names', 'From'], rows,
    'No request refused.');
}
