// hookd portal: a customer looks after their own endpoints.
//
// The form that adds or edits an endpoint (URL, description, event types from the catalog
// with their descriptions and example payloads, channels, rate limit, requests in flight,
// order, custom headers), and the endpoint page's actions: pause and resume, a test event of a
// chosen type, delete after a confirmation. Every change is the API call a customer's token
// makes, so the portal can do no more than the token may; when the API refuses a value (422),
// its message is shown beside the field it names. Uses portal.js's helpers; loaded before it.
'use strict';

/** A notice for the next page drawn (after a save moves the visitor to another page). */
let flashNotice = null;

function flash(kind, text) {
  flashNotice = { kind, text };
}

/** The pending notice, once. */
function takeFlash() {
  const taken = flashNotice;
  flashNotice = null;
  return taken ? notice(taken.kind, taken.text) : null;
}

/** The API's names for a field (and Svix's cloud names), to the form's. */
const FIELD_ALIASES = { filterTypes: 'eventTypes', rateLimit: 'throttleRate' };

/** A form control with a place for the API's message about it, under it. */
function checkedField(fields, name, labelText, control, hint) {
  const error = h('p', { class: 'field-error', id: uid('err'), hidden: true });
  fields[name] = { control, error };
  const wrapper = field(labelText, control, hint);
  wrapper.append(error);
  return wrapper;
}

function clearFieldErrors(fields) {
  for (const { control, error } of Object.values(fields)) {
    error.hidden = true;
    error.textContent = '';
    control.removeAttribute('aria-invalid');
    const described = (control.getAttribute('aria-describedby') || '').split(' ').filter((id) => id && id !== error.id);
    if (described.length) control.setAttribute('aria-describedby', described.join(' '));
    else control.removeAttribute('aria-describedby');
  }
}

/**
 * Shows each of a 422 answer's field messages beside its field and focuses the first; returns
 * the messages that name no field of the form.
 */
function showFieldErrors(fields, error) {
  const details = error.body && Array.isArray(error.body.detail) ? error.body.detail : [];
  const unplaced = [];
  let first = null;
  for (const detail of details) {
    const name = (detail.loc || [])[1];
    const target = fields[FIELD_ALIASES[name] || name];
    if (!target) {
      unplaced.push(`${(detail.loc || []).slice(1).join('.') || 'request'}: ${detail.msg}`);
      continue;
    }
    target.error.hidden = false;
    target.error.textContent = detail.msg;
    target.control.setAttribute('aria-invalid', 'true');
    const described = target.control.getAttribute('aria-describedby');
    target.control.setAttribute('aria-describedby', [described, target.error.id].filter(Boolean).join(' '));
    first = first || target.control;
  }
  if (first) first.focus();
  if (details.length === 0) unplaced.push(error.message);
  return unplaced;
}

/** The catalog as checkboxes, each with its description and example payload. */
function eventTypePicker(fields, catalog, chosen) {
  const known = new Set(catalog.map((et) => et.name));
  const extra = (chosen || []).filter((name) => !known.has(name)).map((name) => ({ name, description: 'Not in the catalog' }));
  const group = h('fieldset', { class: 'picker', tabindex: -1 },
    h('legend', {}, 'Event types'),
    h('p', { class: 'hint', id: uid('hint') }, 'Leave every box empty to receive every event type.'));
  for (const et of [...catalog, ...extra]) {
    const box = h('input', { type: 'checkbox', name: 'eventTypes', value: et.name, checked: (chosen || []).includes(et.name) });
    box.id = uid('et');
    const example = et.example ? h('details', { class: 'example' }, h('summary', {}, 'Example payload'),
      h('pre', {}, JSON.stringify(et.example, null, 2))) : null;
    group.append(h('div', { class: 'pick' },
      box,
      h('label', { for: box.id }, h('span', { class: 'mono' }, et.name),
        et.description ? h('span', { class: 'hint' }, et.description) : null),
      example));
  }
  const error = h('p', { class: 'field-error', id: uid('err'), hidden: true });
  group.append(error);
  fields.eventTypes = { control: group, error };
  return group;
}

function pickedEventTypes(form) {
  return [...form.querySelectorAll('input[name="eventTypes"]:checked')].map((box) => box.value);
}

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

/** The list typed in a comma-separated field, or null when empty. */
function listOrNull(text) {
  const list = text.split(',').map((t) => t.trim()).filter(Boolean);
  return list.length ? list : null;
}

function numberOrNull(text) {
  return text.trim() === '' ? null : Number(text);
}

/** The page that adds an endpoint (no `endpointId`) or edits one. */
async function renderEndpointForm(appId, endpointId) {
  const base = endpointId ? `/app/${enc(appId)}/endpoint/${enc(endpointId)}` : null;
  const [app, ep, catalog, headers] = await Promise.all([
    get(`/app/${enc(appId)}`),
    base ? get(base) : null,
    get('/event-type?limit=250').then((list) => list.data).catch((error) => {
      if (error.status === 401) throw error;
      return [];
    }),
    base ? get(`${base}/headers`) : { headers: {}, sensitive: [] },
  ]);
  const fields = {};
  const input = (attrs, value) => {
    const control = h('input', attrs);
    control.value = value === null || value === undefined ? '' : value;
    return control;
  };
  const url = input({ type: 'url', name: 'url', autocomplete: 'url', spellcheck: 'false', inputmode: 'url' }, ep && ep.url);
  const description = input({ type: 'text', name: 'description' }, ep && ep.description);
  const channels = input({ type: 'text', name: 'channels', spellcheck: 'false' }, ep && ep.channels ? ep.channels.join(', ') : '');
  const rate = input({ type: 'number', name: 'throttleRate', min: 1, step: 1, inputmode: 'numeric' }, ep && ep.rateLimit);
  const ceiling = input({ type: 'number', name: 'maxConcurrency', min: 1, max: 1000, step: 1, inputmode: 'numeric' }, ep && ep.maxConcurrency);
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
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    save.disabled = true;
    clearFieldErrors(fields);
    replace(status);
    try {
      const saved = await saveEndpoint(app, ep, form, { url, description, channels, rate, ceiling, ordering, headerText }, headers, fields);
      if (!saved) return;
      flash('success', ep ? 'Endpoint saved.' : 'Endpoint added.');
      announce(ep ? 'Endpoint saved.' : 'Endpoint added.');
      location.hash = `#/app/${enc(app.id)}/endpoint/${enc(saved.id)}`;
    } catch (error) {
      if (error.status === 401) return;
      const unplaced = error.status === 422 ? showFieldErrors(fields, error) : [error.message];
      if (unplaced.length) replace(status, notice('error', unplaced.join('; ')));
      announce('The endpoint was not saved.');
    } finally {
      save.disabled = false;
    }
  });
  page(ep ? `Edit ${ep.url}` : 'Add an endpoint', crumbsTo(app, ep ? 'Edit endpoint' : 'New endpoint'), form);
  url.focus();
}

/** Creates or changes the endpoint from the form; the saved endpoint, or null if refused here. */
async function saveEndpoint(app, ep, form, controls, headers, fields) {
  const parsed = parseHeaderLines(controls.headerText.value);
  if (parsed.error) {
    showFieldErrors(fields, { body: { detail: [{ loc: ['body', 'headers'], msg: parsed.error }] } });
    return null;
  }
  const eventTypes = pickedEventTypes(form);
  const body = {
    url: controls.url.value.trim(),
    description: controls.description.value.trim(),
    eventTypes: eventTypes.length ? eventTypes : null,
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

/** Pause or resume: a paused endpoint is sent nothing until resumed. */
function pauseAction(epBase, ep) {
  const pausing = !ep.disabled;
  return action(pausing ? 'Pause' : 'Resume',
    pausing ? 'Stop sending to this endpoint. Messages published meanwhile are not queued for it.'
      : 'Send to this endpoint again. Recover its failed messages below if it missed any.',
    null, pausing ? 'Pause endpoint' : 'Resume endpoint',
    async () => {
      await call('PATCH', epBase, { disabled: pausing });
      flash('success', pausing ? 'Endpoint paused.' : 'Endpoint resumed.');
      announce(pausing ? 'Endpoint paused.' : 'Endpoint resumed.');
      await route();
    }, pausing ? 'secondary' : null);
}

/** The event types a test may send: the endpoint's filter, else the whole catalog. */
async function testEventTypes(ep) {
  if (ep.eventTypes && ep.eventTypes.length) return ep.eventTypes;
  try {
    const names = (await get('/event-type?limit=250&with_content=false')).data.map((et) => et.name);
    return names.length ? names : ['webhook.test'];
  } catch (error) {
    if (error.status === 401) throw error;
    return ['webhook.test'];
  }
}

/** Sends the catalog's example of a chosen event type to this endpoint alone, and waits for the attempt. */
async function testAction(app, epBase, ep) {
  const names = await testEventTypes(ep);
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

/** Delete, behind a confirmation that names what goes. */
function deleteAction(app, epBase, ep) {
  const status = h('div', {});
  const confirmBox = h('div', { class: 'confirm', role: 'group', 'aria-label': 'Confirm deletion', hidden: true, tabindex: -1 });
  const start = h('button', { type: 'button', class: 'danger' }, 'Delete endpoint');
  const cancel = h('button', { type: 'button', class: 'secondary' }, 'Cancel');
  const really = h('button', { type: 'button', class: 'danger' }, 'Delete for good');
  replace(confirmBox,
    h('p', {}, 'Delete ', h('strong', {}, ep.url), '? hookd stops sending to it at once and forgets its secret and its delivery log. This cannot be undone.'),
    h('div', { class: 'row' }, really, cancel));
  start.addEventListener('click', () => {
    confirmBox.hidden = false;
    start.hidden = true;
    cancel.focus();
  });
  cancel.addEventListener('click', () => {
    confirmBox.hidden = true;
    start.hidden = false;
    start.focus();
  });
  really.addEventListener('click', async () => {
    really.disabled = true;
    try {
      await call('DELETE', epBase);
      flash('success', `Endpoint ${ep.url} deleted.`);
      announce('Endpoint deleted.');
      location.hash = `#/app/${enc(app.id)}`;
    } catch (error) {
      if (error.status !== 401) replace(status, notice('error', error.message));
      really.disabled = false;
    }
  });
  return h('div', { class: 'form-like' }, h('fieldset', {}, h('legend', {}, 'Delete'),
    h('p', {}, 'Remove this endpoint and everything hookd keeps about it.'),
    h('div', { class: 'row' }, start), confirmBox, status));
}
