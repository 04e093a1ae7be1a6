// hookd portal: a customer looks after their own endpoints.
//
// The form that adds or edits an endpoint (URL, description, event types from the catalog
// with their descriptions and example payloads, channels, rate limit, requests in flight,
// order, custom headers), and the endpoint page's test event of a chosen type (pause, resume
// and delete are forms.js's, shared with destinations). Every change is the API call a customer's token
// makes, so the portal can do no more than the token may; when the API refuses a value (422),
// its message is shown beside the field it names. Uses forms.js's and portal.js's helpers.
'use strict';

/** The API's names for a field (and Svix's cloud names), to the form's. */
const FIELD_ALIASES = { filterTypes: 'eventTypes', rateLimit: 'throttleRate' };

/** "Name: value" lines; a name with nothing after the colon removes that header. */
function parseHeaderLines(text) {
  const typed = {};
  for (const line of text.split('\n').map((l) => l.trim()).filter(Boolean)) {
    const colon = line.indexOf(':');
    if (colon < 1) return { error: `"${line}" is not "Name: value"` };
    const value = line.slice(colon + 1).trim();
    typed[line.slice(0, colon).trim()] = value === '' ? null : value;
  }
  return { typed };
}

/** The page that adds an endpoint (no `endpointId`) or edits one. */
async function renderEndpointForm(appId, endpointId) {
  const base = endpointId ? `/app/${enc(appId)}/endpoint/${enc(endpointId)}` : null;
  const app = await get(`/app/${enc(appId)}`);
  const [ep, catalog, headers] = await Promise.all([
    base ? get(base) : null,
    catalogFor(app),
    base ? get(`${base}/headers`) : { headers: {}, sensitive: [] },
  ]);
  const fields = {};
  const url = valued({ type: 'url', name: 'url', autocomplete: 'url', spellcheck: 'false', inputmode: 'url' }, ep && ep.url);
  const description = valued({ type: 'text', name: 'description' }, ep && ep.description);
  const channels = valued({ type: 'text', name: 'channels', spellcheck: 'false' }, ep && ep.channels ? ep.channels.join(', ') : '');
  const rate = valued({ type: 'number', name: 'throttleRate', min: 1, step: 1, inputmode: 'numeric' }, ep && ep.rateLimit);
  const ceiling = valued({ type: 'number', name: 'maxConcurrency', min: 1, max: 1000, step: 1, inputmode: 'numeric' }, ep && ep.maxConcurrency);
  const ordering = h('select', { name: 'ordering' },
    h('option', { value: 'perKey' }, 'Per ordering key'),
    h('option', { value: 'strict' }, 'Strict'));
  ordering.value = (ep && ep.ordering) || 'perKey';
  const shownHeaders = headers.headers || {};
  const headerText = h('textarea', { name: 'headers', rows: 3, spellcheck: 'false' });
  headerText.value = Object.entries(shownHeaders).map(([name, value]) => `${name}: ${value}`).join('\n');
  const hidden = headers.sensitive || [];
  const status = h('div', {});
  const save = h('button', { type: 'submit' }, ep ? 'Save changes' : 'Add endpoint');
  const form = h('form', { class: 'endpoint-form', novalidate: true },
    h('div', { class: 'fields wide' },
      checkedField(fields, 'url', 'URL', url, 'Where hookd sends the events, starting with https'),
      checkedField(fields, 'description', 'Description', description, 'Optional: what this endpoint is for.')),
    eventTypePicker(fields, catalog, ep && ep.eventTypes),
    h('div', { class: 'fields' },
      checkedField(fields, 'channels', 'Channels', channels, 'Optional, separated by commas: only messages of these channels.'),
      checkedField(fields, 'throttleRate', 'Rate limit', rate, 'Requests per second at most; empty for no limit.'),
      checkedField(fields, 'maxConcurrency', 'Requests in flight', ceiling, '1 to 1000 at once; empty for the server\u2019s limit.'),
      checkedField(fields, 'ordering', 'Order', ordering, 'One at a time in publish order: messages sharing an ordering key, or (strict) every message.')),
    checkedField(fields, 'headers', 'Custom headers', headerText,
      hidden.length ? `One per line, as Name: value. Also sent, values hidden: ${hidden.join(', ')}; a line naming one replaces it, "Name:" alone removes it.`
        : 'One per line, as Name: value; sent with every request.'),
    h('div', { class: 'row' }, save, h('a', { href: ep ? `#/app/${enc(app.id)}/endpoint/${enc(ep.id)}` : `#/app/${enc(app.id)}` }, 'Cancel')),
    status);
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    submitChecked(save, fields, status, 'The endpoint was not saved.', async () => {
      const saved = await saveEndpoint(app, ep, form, { url, description, channels, rate, ceiling, ordering, headerText }, headers);
      flash('success', ep ? 'Endpoint saved.' : 'Endpoint added.');
      announce(ep ? 'Endpoint saved.' : 'Endpoint added.');
      location.hash = `#/app/${enc(app.id)}/endpoint/${enc(saved.id)}`;
    }, FIELD_ALIASES);
  });
  page(ep ? `Edit ${ep.url}` : 'Add an endpoint', crumbsTo(app, ep ? 'Edit endpoint' : 'New endpoint'), form);
  url.focus();
}

/** Creates or changes the endpoint from the form; the saved endpoint. */
async function saveEndpoint(app, ep, form, controls, headers) {
  const parsed = parseHeaderLines(controls.headerText.value);
  if (parsed.error) throw refusal('headers', parsed.error);
  const body = {
    url: controls.url.value.trim(),
    description: controls.description.value.trim(),
    eventTypes: pickedEventTypes(form),
    channels: listOrNull(controls.channels.value),
    throttleRate: numberOrNull(controls.rate.value),
    maxConcurrency: numberOrNull(controls.ceiling.value),
    ordering: controls.ordering.value,
  };
  if (!ep) {
    const typed = Object.entries(parsed.typed).filter(([, value]) => value !== null);
    if (typed.length) body.headers = Object.fromEntries(typed);
    return (await call('POST', `/app/${enc(app.id)}/endpoint`, body)).data;
  }
  const base = `/app/${enc(app.id)}/endpoint/${enc(ep.id)}`;
  const saved = (await call('PATCH', base, body)).data;
  // Credential headers come by name only: a save changes only the headers the form shows or
  // names, never drops a hidden one.
  const shown = headers.headers || {};
  const hidden = headers.sensitive || [];
  const changes = { ...parsed.typed };
  for (const name of Object.keys(shown)) if (!(name in changes)) changes[name] = null;
  const changed = Object.entries(changes).some(([name, value]) => hidden.includes(name) || shown[name] !== (value === null ? undefined : value));
  if (changed) await call('PATCH', `${base}/headers`, { headers: changes });
  return saved;
}

// ---------------------------------------------------------------- the endpoint page's actions

/** The event types a test may send: the endpoint's filter, else the whole catalog. */
async function testEventTypes(app, ep) {
  if (ep.eventTypes && ep.eventTypes.length) return ep.eventTypes;
  const names = (await catalogFor(app, '&with_content=false')).map((et) => et.name);
  return names.length ? names : ['webhook.test'];
}

/** Sends the catalog's example of a chosen event type to this endpoint alone, and waits for the attempt. */
async function testAction(app, epBase, ep) {
  const names = await testEventTypes(app, ep);
  const choice = h('select', { name: 'eventType' }, names.map((name) => h('option', { value: name }, name)));
  return action('Send a test event', 'Sends the catalog\u2019s example payload of the event type to this endpoint alone.',
    field('Event type', choice), 'Send test event',
    async (status) => {
      const msg = (await call('POST', `${epBase}/send-example`, { eventType: choice.value })).data;
      const link = h('a', { href: `#/app/${enc(app.id)}/msg/${enc(msg.id)}` }, msg.id);
      replace(status, notice('', 'Test message ', link, ' queued; waiting for the attempt…'));
      announce('Test message queued.');
      const attempt = await firstAttempt(app, msg.id, status);
      if (!attempt) {
        replace(status, notice('', 'Test message ', link, ' is queued; no attempt yet (is the endpoint paused?).'));
        return;
      }
      const ok = attempt.status === 0;
      const answer = attempt.responseStatusCode ? `HTTP ${attempt.responseStatusCode}` : 'no answer';
      replace(status, notice(ok ? 'success' : 'error', `Test message `, link, ok ? ` delivered: ${answer}.` : ` failed: ${answer}.`));
      announce(ok ? `Test delivered: ${answer}.` : `Test failed: ${answer}.`);
    });
}

/** Polls for the first attempt of `msgId` for up to half a minute, while `status` is shown. */
async function firstAttempt(app, msgId, status) {
  for (let tries = 0; tries < 30 && status.isConnected; tries += 1) {
    await new Promise((resolve) => { setTimeout(resolve, 1000); });
    const attempts = await get(`/app/${enc(app.id)}/attempt/msg/${enc(msgId)}?limit=1`);
    if (attempts.data.length) return attempts.data[0];
  }
  return null;
}
