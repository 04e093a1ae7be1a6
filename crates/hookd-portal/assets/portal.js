// hookd delivery log portal.
//
// Static pages that call hookd's own API (/api/v1) with the token the visitor signed in with,
// so every view and action goes through the same authentication and application scoping as
// any other API client. The token lives in sessionStorage (this tab only, gone when it
// closes); an app-portal link carries it in the URL fragment, which never reaches a server,
// and the fragment is erased from the address bar at once.
//
// Everything shown from the API is inserted as text (never as HTML): payloads and receiver
// answers come from strangers.
'use strict';

const API = '/api/v1';
const TOKEN_KEY = 'hookd.portal.token';
const PAGE_SIZE = 50;
const DAY_MS = 24 * 60 * 60 * 1000;

const session = { token: null, scope: null, appId: null };

// ---------------------------------------------------------------- DOM helpers

/** Builds an element: h('a', {href: '#'}, 'text', child, [more], null). */
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith('on')) el.addEventListener(name.slice(2), value);
    else if (name === 'class') el.className = value;
    else if (value === true) el.setAttribute(name, '');
    else el.setAttribute(name, String(value));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

function replace(el, ...children) {
  el.replaceChildren();
  return append(el, children);
}

let uniqueCounter = 0;
function uid(prefix) {
  uniqueCounter += 1;
  return `${prefix}-${uniqueCounter}`;
}

/** A labelled form control; `control` is an input, select or textarea element. */
function field(labelText, control, hint) {
  control.id = control.id || uid('f');
  const hintEl = hint ? h('span', { class: 'hint', id: `${control.id}-hint` }, hint) : null;
  if (hintEl) control.setAttribute('aria-describedby', hintEl.id);
  return h('div', {}, h('label', { for: control.id }, labelText, hintEl), control);
}

function announce(text) {
  const region = document.getElementById('announce');
  region.textContent = '';
  // A fresh text node makes screen readers speak repeated messages again.
  setTimeout(() => { region.textContent = text; }, 50);
}

function notice(kind, ...children) {
  return h('div', { class: `notice ${kind}`, role: kind === 'error' ? 'alert' : 'status' }, children);
}

function time(iso) {
  if (!iso) return '—';
  const date = new Date(iso);
  return h('time', { datetime: iso, title: iso }, date.toLocaleString());
}

function table(caption, headings, rows, empty) {
  if (rows.length === 0) return h('p', {}, empty);
  return h('div', { class: 'table-wrap', tabindex: 0, role: 'region', 'aria-label': caption },
    h('table', {},
      h('caption', {}, caption),
      h('thead', {}, h('tr', {}, headings.map((t) => h('th', { scope: 'col' }, t)))),
      h('tbody', {}, rows)));
}

const STATUS = {
  success: ['Delivered', 'ok'],
  pending: ['Pending', 'wait'],
  sending: ['Sending', 'wait'],
  fail: ['Failed', 'bad'],
};

function statusBadge(statusText) {
  const [label, kind] = STATUS[statusText] || [statusText, 'wait'];
  return h('span', { class: `badge ${kind}` }, label);
}

function percent(rate) {
  return rate === null || rate === undefined ? '—' : `${Number((rate * 100).toFixed(1))}%`;
}

/** A local `datetime-local` value for `date`. */
function localInput(date) {
  const pad = (n) => String(n).padStart(2, '0');
  return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())}T${pad(date.getHours())}:${pad(date.getMinutes())}`;
}

function isoFromLocal(value) {
  return value ? new Date(value).toISOString() : null;
}

// ---------------------------------------------------------------- the API

class ApiError extends Error {
  constructor(status, body) {
    super(describe(status, body));
    this.status = status;
    this.body = body;
  }

  /** Whether the API has no such route at all (an older or smaller hookd). */
  get unrouted() {
    return this.status === 404 && this.body && this.body.detail === 'route not found';
  }
}

function describe(status, body) {
  if (body && Array.isArray(body.detail)) {
    return body.detail.map((d) => `${(d.loc || []).slice(1).join('.') || 'request'}: ${d.msg}`).join('; ');
  }
  if (body && typeof body.detail === 'string') return body.detail;
  if (status === 0) return 'hookd could not be reached';
  return `hookd answered ${status}`;
}

/** Calls the API; resolves to {data, text}, rejects with ApiError. */
async function call(method, path, body) {
  const headers = { Authorization: `Bearer ${session.token}` };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  let response;
  try {
    response = await fetch(API + path, {
      method, headers, body: body === undefined ? undefined : JSON.stringify(body), cache: 'no-store',
    });
  } catch (error) {
    throw new ApiError(0, null);
  }
  const text = await response.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch (error) { data = null; }
  if (response.status === 401 && session.scope) {
    signOut('hookd did not accept this token (it may have expired). Sign in again.');
    throw new ApiError(401, data);
  }
  if (!response.ok) throw new ApiError(response.status, data);
  return { data, text };
}

const get = async (path) => (await call('GET', path)).data;
const enc = encodeURIComponent;

function query(params) {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) {
    if (value !== null && value !== undefined && value !== '') search.set(name, value);
  }
  const text = search.toString();
  return text ? `?${text}` : '';
}

// ---------------------------------------------------------------- session

async function signIn(token) {
  session.token = token;
  const who = await get('/auth/whoami');
  session.scope = who.scope;
  session.appId = who.appId || null;
  sessionStorage.setItem(TOKEN_KEY, token);
  showNav();
}

function signOut(message) {
  sessionStorage.removeItem(TOKEN_KEY);
  session.token = null;
  session.scope = null;
  session.appId = null;
  document.getElementById('nav').hidden = true;
  if (location.pathname !== '/portal/' || location.hash !== '#/login') {
    history.replaceState(null, '', '/portal/#/login');
  }
  renderLogin(message);
}

function showNav() {
  document.getElementById('nav').hidden = false;
  const home = document.getElementById('nav-home');
  home.textContent = session.scope === 'admin' ? 'Applications' : 'Application';
  document.getElementById('nav-sources').hidden = session.scope !== 'admin';
}

/** The token from an app-portal link (`/portal/login#token=…`), erased from the address bar. */
function tokenFromLink() {
  const fragment = new URLSearchParams(location.hash.replace(/^#/, ''));
  const token = fragment.get('token');
  if (token) history.replaceState(null, '', '/portal/#/');
  return token;
}

// ---------------------------------------------------------------- routing

const main = () => document.getElementById('main');

function page(title, crumbs, ...content) {
  document.title = `${title} · hookd delivery log`;
  const heading = h('h1', {}, title);
  replace(main(), crumbs ? h('nav', { class: 'crumbs', 'aria-label': 'You are here' }, crumbs) : null, heading, content);
  // A new page: start at its top, and let keyboard and screen-reader users start there too.
  window.scrollTo(0, 0);
  main().focus({ preventScroll: true });
}

/** The trail of links above a page's title: applications (for admins), the app, the page. */
function crumbsTo(app, extra) {
  const parts = [
    session.scope === 'admin' ? h('a', { href: '#/' }, 'Applications') : null,
    app ? h('a', { href: `#/app/${enc(app.id)}` }, app.name) : null,
    extra,
  ].filter(Boolean);
  return parts.length ? parts.flatMap((part, i) => (i ? [' / ', part] : [part])) : null;
}

async function route() {
  if (!session.token) {
    renderLogin();
    return;
  }
  const [path, search] = location.hash.replace(/^#/, '').split('?');
  const params = new URLSearchParams(search || '');
  const parts = path.split('/').filter(Boolean).map(decodeURIComponent);
  try {
    if (parts[0] === 'login') {
      location.hash = '#/';
    } else if (parts.length === 0) {
      if (session.scope === 'app') location.replace(await ingestHome(session.appId));
      else await renderApps(params);
    } else if (parts[0] === 'event-types' && parts.length === 1) {
      await renderEventTypes(params);
    } else if (parts[0] === 'event-types' && parts.length === 2) {
      await renderEventType(parts[1]);
    } else if (parts[0] === 'app' && parts.length === 2) {
      await renderApp(parts[1], params);
    } else if (parts[0] === 'app' && parts[2] === 'new-endpoint' && parts.length === 3) {
      await renderEndpointForm(parts[1], null);
    } else if (parts[0] === 'app' && parts[2] === 'endpoint' && parts.length === 4) {
      await renderEndpoint(parts[1], parts[3]);
    } else if (parts[0] === 'app' && parts[2] === 'endpoint' && parts[4] === 'edit' && parts.length === 5) {
      await renderEndpointForm(parts[1], parts[3]);
    } else if (parts[0] === 'app' && parts[2] === 'destination' && parts.length === 4) {
      await renderDestination(parts[1], parts[3]);
    } else if (parts[0] === 'app' && parts[2] === 'msg' && parts.length === 4) {
      await renderMessage(parts[1], parts[3]);
    } else if (!(await renderIngest(parts, params))) {
      page('Not found', crumbsTo(null), h('p', {}, 'The portal has no page at this address.'));
    }
  } catch (error) {
    if (error.status === 401) return;
    page('Something went wrong', crumbsTo(null), notice('error', error.message));
  }
}

// ---------------------------------------------------------------- pages

function renderLogin(message) {
  const input = h('input', { type: 'password', name: 'token', autocomplete: 'off', required: true, spellcheck: 'false' });
  const status = h('div', {});
  const form = h('form', {
    class: 'card',
    onsubmit: async (event) => {
      event.preventDefault();
      replace(status);
      try {
        await signIn(input.value.trim());
        history.replaceState(null, '', '/portal/#/');
        await route();
      } catch (error) {
        session.token = null;
        replace(status, notice('error', error.status === 401
          ? 'hookd does not know this token. Check that you pasted all of it.'
          : error.message));
        input.focus();
      }
    },
  },
  message ? notice('error', message) : null,
  h('p', {}, 'See every message hookd accepted, where it went, and what each receiver answered.'),
  field('API token', input, 'An admin token, or a token for one application. It stays in this browser tab.'),
  h('p', {}, h('button', { type: 'submit' }, 'Sign in')),
  status);
  page('Sign in to the delivery log', null, form);
  input.focus();
}

async function renderApps(params) {
  const list = await get(`/app${query({ limit: PAGE_SIZE, iterator: params.get('iterator') })}`);
  const rows = list.data.map((app) => h('tr', {},
    h('td', {}, h('a', { href: `#/app/${enc(app.id)}` }, app.name)),
    h('td', {}, app.uid || '—'),
    h('td', { class: 'id' }, app.id),
    h('td', {}, time(app.createdAt))));
  page('Applications', null,
    table('Applications, oldest first', ['Name', 'UID', 'Id', 'Created'], rows, 'No applications yet.'),
    pager(list, params, (iterator) => `#/${query({ iterator })}`));
}

/** The event-type catalog: what can be published, and what each event type is for. */
async function renderEventTypes(params) {
  const list = await get(`/event-type${query({ limit: PAGE_SIZE, iterator: params.get('iterator'), include_archived: 'true' })}`);
  const state = (et) => (et.archived ? 'Archived' : et.deprecated ? 'Deprecated' : 'Active');
  const rows = list.data.map((et) => h('tr', {},
    h('td', {}, h('a', { href: `#/event-types/${enc(et.name)}` }, et.name)),
    h('td', {}, et.description),
    h('td', {}, et.groupName || '—'),
    h('td', {}, state(et))));
  page('Event types', null,
    table('Event types, by name', ['Name', 'Description', 'Group', 'State'], rows, 'The catalog is empty.'),
    pager(list, params, (iterator) => `#/event-types${query({ iterator })}`));
}

/** One event type: its newest schema and an example payload of it. */
async function renderEventType(name) {
  const et = await get(`/event-type/${enc(name)}`);
  const versions = Object.keys(et.schemas || {}).filter((v) => /^\d+$/.test(v)).sort((a, b) => a - b);
  const newest = versions[versions.length - 1];
  const json = (value) => h('pre', { class: 'payload' }, JSON.stringify(value, null, 2));
  page(et.name, [h('a', { href: '#/event-types' }, 'Event types')],
    h('p', {}, et.description),
    h('dl', { class: 'facts' },
      h('dt', {}, 'Group'), h('dd', {}, et.groupName || '—'),
      h('dt', {}, 'State'), h('dd', {}, et.archived ? 'Archived' : et.deprecated ? 'Deprecated' : 'Active')),
    newest
      ? [h('h2', {}, `Schema (version ${newest})`), json(et.schemas[newest]),
        h('h2', {}, 'Example payload'), json(et.example)]
      : h('p', {}, 'This event type has no schema: any JSON object may be published as it.'));
}

/** Older/newer links for a list envelope; `href(iterator)` makes the link. */
function pager(list, params, href, labels = ['Previous page', 'Next page']) {
  const current = params.get('iterator');
  const backwards = current && current.startsWith('-');
  const hasPrevious = current && (!backwards || !list.done) && list.prevIterator;
  const hasNext = (backwards || !list.done) && list.iterator;
  if (!hasPrevious && !hasNext) return null;
  return h('nav', { class: 'pager', 'aria-label': 'Pages' },
    hasPrevious ? h('a', { href: href(list.prevIterator) }, `← ${labels[0]}`) : h('span', {}),
    hasNext ? h('a', { href: href(list.iterator) }, `${labels[1]} →`) : h('span', {}));
}

async function renderApp(appId, params) {
  const [app, endpoints, destinations, suggestions] = await Promise.all([
    get(`/app/${enc(appId)}`),
    get(`/app/${enc(appId)}/endpoint?limit=250`),
    get(`/app/${enc(appId)}/destination?limit=250&extended=true`),
    eventTypeSuggestions(),
  ]);
  // One health call per endpoint, for the first 50 (the default cap of endpoints per application).
  const healths = await endpointsHealth(app.id, endpoints.data.slice(0, 50));
  const endpointRows = endpoints.data.map((ep, i) => h('tr', {},
    h('td', {}, h('a', { href: `#/app/${enc(app.id)}/endpoint/${enc(ep.id)}` }, ep.url)),
    h('td', {}, endpointState(ep)),
    h('td', {}, healthCell(healths[i])),
    h('td', {}, ep.eventTypes && ep.eventTypes.length ? ep.eventTypes.join(', ') : 'All event types'),
    h('td', {}, ep.description || '—')));
  page(app.name, crumbsTo(null),
    takeFlash(),
    h('dl', { class: 'facts' },
      h('dt', {}, 'Application id'), h('dd', { class: 'mono' }, app.id),
      app.uid ? [h('dt', {}, 'UID'), h('dd', { class: 'mono' }, app.uid)] : null),
    h('h2', {}, 'Endpoints'),
    endpoints.data.length ? appHealthView(endpoints.data.slice(0, 50), healths) : null,
    h('p', {}, h('a', { class: 'button', href: `#/app/${enc(app.id)}/new-endpoint` }, 'Add an endpoint')),
    table('Endpoints of this application', ['URL', 'Status', 'Last 24 hours', 'Event types', 'Description'], endpointRows,
      'This application has no endpoints yet.'),
    destinations.data.length ? [h('h2', {}, 'Destinations'), destinationTable(app, destinations.data)] : null,
    h('h2', { id: 'messages' }, 'Messages'),
    suggestions,
    searchForm(app, params),
    await messageResults(app, params));
}

/** The event-type catalog as suggestions for event-type fields (`list="event-types"`). */
async function eventTypeSuggestions() {
  let names = [];
  try {
    names = (await get('/event-type?limit=250')).data.map((et) => et.name);
  } catch (error) {
    if (error.status === 401) throw error;
  }
  return h('datalist', { id: 'event-types' }, names.map((name) => h('option', { value: name })));
}

function endpointState(ep) {
  if (!ep.disabled) return h('span', { class: 'badge ok' }, 'Enabled');
  return [h('span', { class: 'badge bad' }, 'Disabled'), ' ', ep.disabledReason || ''];
}

const SEARCH_FIELDS = ['q', 'event_type', 'status', 'after', 'before'];

function searchForm(app, params) {
  const q = h('input', { type: 'search', name: 'q', value: params.get('q') || '', spellcheck: 'false' });
  const eventType = h('input', {
    type: 'text', name: 'event_type', value: params.get('event_type') || '', spellcheck: 'false', list: 'event-types',
  });
  const status = h('select', { name: 'status' },
    [['', 'Any'], ['0', 'Delivered'], ['1', 'Pending'], ['2', 'Failed']].map(([value, label]) =>
      h('option', { value, selected: params.get('status') === value }, label)));
  const toLocal = (iso) => (iso ? localInput(new Date(iso)) : '');
  const after = h('input', { type: 'datetime-local', name: 'after', value: toLocal(params.get('after')) });
  const before = h('input', { type: 'datetime-local', name: 'before', value: toLocal(params.get('before')) });
  return h('form', {
    role: 'search',
    'aria-label': 'Search messages',
    onsubmit: (event) => {
      event.preventDefault();
      location.hash = `#/app/${enc(app.id)}${query({
        q: q.value.trim(),
        event_type: eventType.value.trim(),
        status: status.value,
        after: isoFromLocal(after.value),
        before: isoFromLocal(before.value),
      })}`;
    },
  },
  h('div', { class: 'fields' },
    field('Message id or eventId', q),
    field('Event type', eventType, 'Several: separate with commas'),
    field('Delivery status', status),
    field('Created after', after),
    field('Created before', before),
    h('div', { class: 'row' },
      h('button', { type: 'submit' }, 'Search'),
      h('a', { href: `#/app/${enc(app.id)}` }, 'Clear'))));
}

async function messageResults(app, params) {
  const q = params.get('q');
  if (q) {
    try {
      const msg = await get(`/app/${enc(app.id)}/msg/${enc(q)}?with_content=false`);
      return messageTable([msg], app, 'The message with this id or eventId');
    } catch (error) {
      if (error.status === 404) return h('p', {}, 'No message of this application has this id or eventId.');
      throw error;
    }
  }
  const filters = {
    event_types: params.get('event_type'),
    status: params.get('status'),
    after: params.get('after'),
    before: params.get('before'),
  };
  const list = await get(`/app/${enc(app.id)}/msg${query({
    ...filters, limit: PAGE_SIZE, iterator: params.get('iterator'), with_content: 'false',
  })}`);
  const searched = SEARCH_FIELDS.some((name) => params.get(name));
  const caption = searched ? 'Matching messages, newest first' : 'Messages, newest first';
  const keep = {};
  for (const name of SEARCH_FIELDS) keep[name] = params.get(name);
  return [
    messageTable(list.data, app, caption),
    pager(list, params, (iterator) => `#/app/${enc(app.id)}${query({ ...keep, iterator })}`, ['Newer', 'Older']),
  ];
}

function messageTable(messages, app, caption) {
  const rows = messages.map((msg) => h('tr', {},
    h('td', {}, time(msg.timestamp)),
    h('td', {}, msg.eventType),
    h('td', {}, deliveriesBadge(msg.deliveries)),
    h('td', { class: 'id' }, h('a', { href: `#/app/${enc(app.id)}/msg/${enc(msg.id)}` }, msg.id)),
    h('td', { class: 'id' }, msg.eventId || '—')));
  return table(caption, ['Created', 'Event type', 'Status', 'Message', 'eventId'], rows, 'No messages match.');
}

// A message's deliveries in one badge: failed if any failed, else pending if any is, else
// delivered; with how many of its endpoints are in that state.
function deliveriesBadge(deliveries) {
  if (!deliveries) return '—';
  const { succeeded, pending, failed } = deliveries;
  const total = succeeded + pending + failed;
  if (total === 0) return h('span', { title: 'No endpoint took this message' }, 'No endpoints');
  const [label, kind, count] = failed > 0 ? ['Failed', 'bad', failed]
    : pending > 0 ? ['Pending', 'wait', pending] : ['Delivered', 'ok', succeeded];
  const title = `${succeeded} delivered, ${pending} pending, ${failed} failed, of ${total} endpoint(s)`;
  return h('span', { class: `badge ${kind}`, title }, `${label} ${count}/${total}`);
}

// ---------------------------------------------------------------- endpoint page

async function renderEndpoint(appId, endpointId) {
  const base = `/app/${enc(appId)}/endpoint/${enc(endpointId)}`;
  const [app, ep, health, attempts, failed] = await Promise.all([
    get(`/app/${enc(appId)}`),
    get(base),
    get(`${base}/health`),
    get(`/app/${enc(appId)}/attempt/endpoint/${enc(endpointId)}?limit=20`),
    get(`${base}/msg?status=2&limit=20&with_content=false`),
  ]);
  const epBase = `/app/${enc(app.id)}/endpoint/${enc(ep.id)}`;
  page(ep.url, crumbsTo(app, 'Endpoint'),
    takeFlash(),
    h('p', { class: 'row' }, h('a', { class: 'button', href: `#/app/${enc(app.id)}/endpoint/${enc(ep.id)}/edit` }, 'Edit endpoint')),
    h('h2', {}, 'Health'),
    healthView(health, app.id),
    h('h2', {}, 'Settings'),
    endpointFacts(ep),
    h('h2', {}, 'Actions'),
    h('div', { class: 'actions' },
      pauseAction(epBase, ep),
      await testAction(app, epBase, ep),
      recoverAction(epBase),
      secretAction(epBase),
      deleteAction(app, epBase, ep)),
    h('h2', {}, 'Recent attempts'),
    attemptTable(attempts.data, app, 'The 20 latest attempts to this endpoint, newest first', true),
    h('h2', {}, 'Failed messages'),
    messageTable(failed.data, app, 'Messages whose delivery to this endpoint failed, newest first'));
}

function endpointFacts(ep) {
  const list = (values, none) => (values && values.length ? values.join(', ') : none);
  return h('dl', { class: 'facts' },
    h('dt', {}, 'Status'), h('dd', {}, endpointState(ep),
      ep.disabled && ep.disabledAt ? [' since ', time(ep.disabledAt)] : null),
    h('dt', {}, 'Endpoint id'), h('dd', { class: 'mono' }, ep.id),
    ep.uid ? [h('dt', {}, 'UID'), h('dd', { class: 'mono' }, ep.uid)] : null,
    h('dt', {}, 'Description'), h('dd', {}, ep.description || '—'),
    h('dt', {}, 'Event types'), h('dd', {}, list(ep.eventTypes, 'All')),
    h('dt', {}, 'Channels'), h('dd', {}, list(ep.channels, 'All')),
    h('dt', {}, 'Rate limit'), h('dd', {}, ep.rateLimit ? `${ep.rateLimit} requests per second` : 'None'),
    h('dt', {}, 'Requests in flight'), h('dd', {}, ep.maxConcurrency ? `At most ${ep.maxConcurrency}` : 'The server\u2019s limit'),
    h('dt', {}, 'Order'), h('dd', {}, ep.ordering === 'strict' ? 'Strict: one at a time, in publish order' : 'Per ordering key'));
}

// ---------------------------------------------------------------- destinations

/** An application's destinations beyond HTTP endpoints: queues, topics, buckets, pollers. */
function destinationTable(app, destinations) {
  const rows = destinations.map((dest) => h('tr', {},
    h('td', { class: 'id' }, h('a', { href: `#/app/${enc(app.id)}/destination/${enc(dest.id)}` }, dest.uid || dest.id)),
    h('td', {}, dest.type),
    h('td', {}, destinationState(dest)),
    h('td', {}, dest.eventTypes && dest.eventTypes.length ? dest.eventTypes.join(', ') : 'All event types')));
  return table('Destinations of this application', ['Destination', 'Type', 'Status', 'Event types'], rows,
    'This application has no destinations.');
}

function destinationState(dest) {
  if (dest.status === 'enabled') return h('span', { class: 'badge ok' }, 'Enabled');
  return [h('span', { class: 'badge bad' }, 'Disabled'), ' ', dest.failureReason || ''];
}

async function renderDestination(appId, destinationId) {
  const base = `/app/${enc(appId)}/destination/${enc(destinationId)}`;
  const [app, dest] = await Promise.all([get(`/app/${enc(appId)}`), get(base)]);
  const destBase = `/app/${enc(app.id)}/destination/${enc(dest.id)}`;
  const facts = h('dl', { class: 'facts' },
    h('dt', {}, 'Status'), h('dd', {}, destinationState(dest)),
    h('dt', {}, 'Destination id'), h('dd', { class: 'mono' }, dest.id),
    dest.uid ? [h('dt', {}, 'UID'), h('dd', { class: 'mono' }, dest.uid)] : null,
    h('dt', {}, 'Type'), h('dd', {}, dest.type),
    h('dt', {}, 'Configuration'),
    h('dd', {}, h('pre', { class: 'mono', 'aria-label': 'Configuration, credentials left out' },
      JSON.stringify(dest.config || {}, null, 2))),
    h('dt', {}, 'Event types'), h('dd', {}, dest.eventTypes && dest.eventTypes.length ? dest.eventTypes.join(', ') : 'All'),
    h('dt', {}, 'Batches'), h('dd', {}, dest.batchSize > 1
      ? `up to ${dest.batchSize} messages, waiting at most ${dest.maxWaitSecs} s` : 'one message at a time'));
  if (dest.type === 'pollingEndpoint') {
    page(`Destination ${dest.uid || dest.id}`, crumbsTo(app, 'Destination'), facts,
      h('h2', {}, 'Polling'),
      h('p', {}, 'Nothing is sent to a polling destination: its consumer reads the messages from ',
        h('code', {}, `GET /api/v1/app/${app.id}/poller/${dest.id}`), '.'),
      h('div', { class: 'actions' }, secretAction(destBase)));
    return;
  }
  // A destination's delivery log is an endpoint's: the same routes take its id.
  const epBase = `/app/${enc(app.id)}/endpoint/${enc(dest.id)}`;
  const [health, attempts, failed] = await Promise.all([
    get(`${epBase}/health`),
    get(`/app/${enc(app.id)}/attempt/endpoint/${enc(dest.id)}?limit=20`),
    get(`${epBase}/msg?status=2&limit=20&with_content=false`),
  ]);
  page(`Destination ${dest.uid || dest.id}`, crumbsTo(app, 'Destination'), facts,
    h('h2', {}, 'Health'),
    healthView(health, app.id),
    h('h2', {}, 'Actions'),
    h('div', { class: 'actions' }, recoverAction(epBase), secretAction(destBase)),
    h('h2', {}, 'Recent attempts'),
    attemptTable(attempts.data, app, 'The 20 latest attempts to this destination, newest first', true),
    h('h2', {}, 'Failed messages'),
    messageTable(failed.data, app, 'Messages whose delivery to this destination failed, newest first'));
}

/** A fieldset with a titled action; `run(status)` does the work and reports into `status`. */
function action(legend, description, controls, buttonLabel, run, buttonClass) {
  const status = h('div', {});
  const button = h('button', { type: 'submit', class: buttonClass || null }, buttonLabel);
  return h('form', {
    onsubmit: async (event) => {
      event.preventDefault();
      button.disabled = true;
      replace(status);
      try {
        await run(status);
      } catch (error) {
        if (error.status !== 401) replace(status, notice('error', error.message));
      } finally {
        button.disabled = false;
      }
    },
  }, h('fieldset', {}, h('legend', {}, legend), description ? h('p', {}, description) : null,
    controls, h('div', { class: 'row' }, button), status));
}

function recoverAction(epBase) {
  const since = h('input', { type: 'datetime-local', required: true, value: localInput(new Date(Date.now() - DAY_MS)) });
  return action('Recover failed messages', 'Queues every message whose delivery to this endpoint failed since the time below.',
    field('Failed since', since), 'Recover',
    async (status) => {
      const out = (await call('POST', `${epBase}/recover`, { since: isoFromLocal(since.value) })).data;
      const count = out.recovered === undefined ? 'The failed' : out.recovered;
      replace(status, notice('success', `${count} failed ${out.recovered === 1 ? 'message was' : 'messages were'} queued again.`));
      announce('Recovery queued.');
    });
}

function secretAction(epBase) {
  const shown = h('div', {});
  const reveal = h('button', {
    type: 'button',
    class: 'secondary',
    onclick: async () => {
      if (reveal.getAttribute('aria-expanded') === 'true') {
        replace(shown);
        reveal.textContent = 'Reveal secret';
        reveal.setAttribute('aria-expanded', 'false');
        return;
      }
      try {
        const { key } = await get(`${epBase}/secret`);
        replace(shown, h('code', { class: 'secret' }, key));
        reveal.textContent = 'Hide secret';
        reveal.setAttribute('aria-expanded', 'true');
      } catch (error) {
        if (error.status !== 401) replace(shown, notice('error', error.message));
      }
    },
    'aria-expanded': 'false',
  }, 'Reveal secret');
  const form = action('Signing secret',
    'Receivers verify signatures with this secret. Rotating makes a new one; hookd signs with the old one too for a while, so receivers can switch.',
    h('div', { class: 'row' }, reveal), 'Rotate secret',
    async (status) => {
      if (!window.confirm('Rotate this endpoint\u2019s signing secret?')) return;
      try {
        await call('POST', `${epBase}/secret/rotate`, {});
      } catch (error) {
        if (error.unrouted) {
          replace(status, notice('error', 'This hookd server cannot rotate secrets yet (its API answered 404 for the rotation request). Nothing was changed.'));
          return;
        }
        throw error;
      }
      const { key } = await get(`${epBase}/secret`);
      replace(status, notice('success', 'New secret (shown once here; copy it now):', h('code', { class: 'secret' }, key)));
      replace(shown);
      announce('Secret rotated. The new secret is shown.');
    }, 'secondary');
  form.querySelector('fieldset').append(shown);
  return form;
}

// ---------------------------------------------------------------- message page

const TRIGGER = ['Scheduled', 'Manual'];

function attemptRow(attempt, app, withMessage) {
  const ok = attempt.status === 0;
  const code = attempt.responseStatusCode;
  const result = [h('span', { class: `badge ${ok ? 'ok' : 'bad'}` }, ok ? 'Succeeded' : 'Failed'), ' ',
    code ? `HTTP ${code}` : 'no answer'];
  const details = h('details', {}, h('summary', {}, code ? 'Response' : 'Error'),
    attempt.responseHead ? [h('h4', { class: 'visually-hidden' }, 'Response head'), h('pre', {}, attempt.responseHead)] : null,
    attempt.response ? h('pre', {}, attempt.response) : h('p', {}, code ? 'Empty body.' : 'No details.'));
  return h('tr', {},
    h('td', {}, time(attempt.timestamp)),
    withMessage ? h('td', { class: 'id' }, h('a', { href: `#/app/${enc(app.id)}/msg/${enc(attempt.msgId)}` }, attempt.msgId)) : null,
    h('td', { class: 'result' }, result),
    h('td', {}, `${attempt.responseDurationMs} ms`),
    h('td', {}, TRIGGER[attempt.triggerType] || '—'),
    h('td', {}, details));
}

function attemptTable(attempts, app, caption, withMessage) {
  const headings = ['Time', withMessage ? 'Message' : null, 'Result', 'Duration', 'Trigger', 'Answer'].filter(Boolean);
  return table(caption, headings, attempts.map((a) => attemptRow(a, app, withMessage)), 'No attempts yet.');
}

/**
 * The exact payload text inside the API's JSON answer. hookd writes the stored bytes into the
 * answer unchanged, so the value of "payload" is found by scanning the answer's text (keys
 * before it cannot contain quotes), not by re-serializing a parsed object.
 */
function rawPayload(text) {
  const start = text.indexOf('"payload":');
  if (start < 0) return null;
  let i = start + '"payload":'.length;
  let depth = 0;
  let inString = false;
  const from = i;
  for (; i < text.length; i += 1) {
    const c = text[i];
    if (inString) {
      if (c === '\\') i += 1;
      else if (c === '"') inString = false;
    } else if (c === '"') {
      inString = true;
    } else if (c === '{' || c === '[') {
      depth += 1;
    } else if (c === '}' || c === ']') {
      depth -= 1;
      if (depth === 0) return text.slice(from, i + 1);
    }
  }
  return null;
}

function payloadView(raw) {
  if (raw === null || raw === '{}') {
    return h('p', {}, 'The payload is empty or was removed under the retention policy.');
  }
  const bytes = new TextEncoder().encode(raw);
  let pretty = raw;
  try { pretty = JSON.stringify(JSON.parse(raw), null, 2); } catch (error) { /* shown as is */ }
  const prettyPre = h('pre', { tabindex: 0, 'aria-label': 'Payload, pretty-printed' }, pretty);
  const exactPre = h('pre', { tabindex: 0, 'aria-label': 'Payload, exact bytes', hidden: true }, raw);
  const toggle = h('button', {
    type: 'button',
    class: 'secondary',
    'aria-pressed': 'false',
    onclick: () => {
      const exact = toggle.getAttribute('aria-pressed') !== 'true';
      toggle.setAttribute('aria-pressed', String(exact));
      prettyPre.hidden = exact;
      exactPre.hidden = !exact;
    },
  }, 'Show exact bytes');
  const download = h('a', {
    href: URL.createObjectURL(new Blob([bytes], { type: 'application/json' })),
    download: 'payload.json',
  }, `Download the exact ${bytes.length} bytes`);
  return [h('div', { class: 'row' }, toggle, download),
    h('p', { class: 'hint' }, 'Pretty-printing reformats (and may round very large numbers); the exact bytes are what every receiver got and every signature covers.'),
    prettyPre, exactPre];
}

async function renderMessage(appId, msgId) {
  const msgPath = `/app/${enc(appId)}/msg/${enc(msgId)}`;
  const [app, fetched] = await Promise.all([get(`/app/${enc(appId)}`), call('GET', msgPath)]);
  const msg = fetched.data;
  const deliveries = h('div', {});
  page(`Message ${msg.id}`, crumbsTo(app, 'Message'),
    h('dl', { class: 'facts' },
      h('dt', {}, 'Event type'), h('dd', {}, msg.eventType),
      h('dt', {}, 'eventId'), h('dd', { class: 'mono' }, msg.eventId || '—'),
      msg.orderingKey ? [h('dt', {}, 'Ordering key'), h('dd', { class: 'mono' }, msg.orderingKey)] : null,
      msg.tags && msg.tags.length ? [h('dt', {}, 'Tags'), h('dd', {}, msg.tags.join(', '))] : null,
      msg.deliverAt ? [h('dt', {}, 'Scheduled for'), h('dd', {}, time(msg.deliverAt))] : null,
      h('dt', {}, 'Created'), h('dd', {}, time(msg.timestamp)),
      msg.channels ? [h('dt', {}, 'Channels'), h('dd', {}, msg.channels.join(', '))] : null),
    h('h2', {}, 'Payload'),
    payloadView(rawPayload(fetched.text)),
    h('h2', {}, 'Deliveries'),
    deliveries);
  await renderDeliveries(deliveries, app, msg);
}

async function loadDeliveries(app, msg) {
  const [routed, attempts] = await Promise.all([
    get(`/app/${enc(app.id)}/msg/${enc(msg.id)}/endpoint`),
    get(`/app/${enc(app.id)}/attempt/msg/${enc(msg.id)}?limit=250`),
  ]);
  return { routed: routed.data, attempts: attempts.data };
}

async function renderDeliveries(container, app, msg, loaded, message) {
  const { routed, attempts } = loaded || await loadDeliveries(app, msg);
  if (routed.length === 0) {
    replace(container, h('p', {}, 'This message was not routed to any endpoint (none was enabled and subscribed when it was published).'));
    return;
  }
  replace(container, routed.map((dest) => {
    const mine = attempts.filter((a) => a.endpointId === dest.id);
    const status = h('div', {});
    if (message && message.endpointId === dest.id) replace(status, notice(message.kind, message.text));
    const resend = h('button', {
      type: 'button',
      onclick: async () => {
        resend.disabled = true;
        try {
          await call('POST', `/app/${enc(app.id)}/msg/${enc(msg.id)}/endpoint/${enc(dest.id)}/resend`, {});
          replace(status, notice('', 'Resend queued; waiting for the attempt…'));
          announce('Resend queued.');
          await waitForAttempt(container, app, msg, dest.id, mine.length);
        } catch (error) {
          if (error.status !== 401) replace(status, notice('error', error.message));
          resend.disabled = false;
        }
      },
    }, 'Resend to this endpoint');
    const skip = dest.statusText === 'pending' ? h('button', {
      type: 'button',
      class: 'secondary',
      onclick: async () => {
        skip.disabled = true;
        try {
          await call('POST', `/app/${enc(app.id)}/msg/${enc(msg.id)}/endpoint/${enc(dest.id)}/skip`, {});
          announce('Skipped: the next message of its ordering key goes now.');
          await renderDeliveries(container, app, msg, null,
            { endpointId: dest.id, kind: 'success', text: 'Skipped: marked failed without an attempt.' });
        } catch (error) {
          if (error.status !== 401) replace(status, notice('error', error.message));
          skip.disabled = false;
        }
      },
    }, 'Skip (give up)') : null;
    const behind = dest.waitingBehind ? ['Waiting behind ',
      h('a', { class: 'mono', href: `#/app/${enc(app.id)}/msg/${enc(dest.waitingBehind)}` }, dest.waitingBehind)] : null;
    return h('section', { class: 'delivery', 'aria-label': `Delivery to ${dest.url}` },
      h('h3', {}, h('a', { href: `#/app/${enc(app.id)}/endpoint/${enc(dest.id)}` }, dest.url)),
      h('p', { class: 'row' }, statusBadge(dest.statusText),
        dest.nextAttempt ? ['Next attempt ', time(dest.nextAttempt)] : null, behind, resend, skip),
      status,
      attemptTable(mine, app, `Attempts to ${dest.url}, newest first`, false));
  }));
}

/** Polls until an attempt to `endpointId` beyond the `known` ones is recorded, then shows it. */
async function waitForAttempt(container, app, msg, endpointId, known) {
  for (let tries = 0; tries < 60; tries += 1) {
    await new Promise((resolve) => { setTimeout(resolve, 1000); });
    if (!container.isConnected) return;
    const loaded = await loadDeliveries(app, msg);
    const mine = loaded.attempts.filter((a) => a.endpointId === endpointId);
    if (mine.length > known) {
      const latest = mine[0];
      const text = latest.status === 0
        ? `The resend succeeded: HTTP ${latest.responseStatusCode}.`
        : `The resend failed: ${latest.responseStatusCode ? `HTTP ${latest.responseStatusCode}` : 'no answer'}.`;
      await renderDeliveries(container, app, msg, loaded,
        { endpointId, kind: latest.status === 0 ? 'success' : 'error', text });
      announce(text);
      return;
    }
  }
  await renderDeliveries(container, app, msg, null,
    { endpointId, kind: '', text: 'The resend is queued; no attempt was recorded within a minute. Reload to check again.' });
}

// ---------------------------------------------------------------- start

async function start() {
  document.getElementById('sign-out').addEventListener('click', () => signOut());
  // The skip link must not change the fragment: the fragment is the portal's page address.
  document.querySelector('.skip').addEventListener('click', (event) => {
    event.preventDefault();
    main().focus();
  });
  window.addEventListener('hashchange', route);
  const linked = location.pathname.endsWith('/login') ? tokenFromLink() : null;
  const token = linked || sessionStorage.getItem(TOKEN_KEY);
  if (location.pathname.endsWith('/login') && !linked) history.replaceState(null, '', '/portal/#/login');
  if (token) {
    try {
      await signIn(token);
    } catch (error) {
      signOut(error.status === 401 ? 'hookd does not accept this token (it may have expired or been revoked).' : error.message);
      return;
    }
  }
  await route();
}

start();
