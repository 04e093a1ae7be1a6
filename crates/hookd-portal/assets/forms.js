// hookd portal: what the pages that change things share.
//
// Endpoints and destinations are looked after with the same pieces: a field with a place for
// the API's message about it (a 422 answer's `loc` names the field), the event-type picker
// over the catalog, pause and resume, delete behind a confirmation, and a notice carried to
// the next page after a save. Uses portal.js's helpers; loaded before the pages that use it.
'use strict';

/**
 * hookd's operational event types (hookd_core::operations::EVENT_TYPES; a unit test of the
 * portal crate keeps the two equal). They are in every catalog but only ever published to the
 * reserved application below, so the pickers of every other application leave them out.
 */
const OPERATIONAL_EVENT_TYPES = [
  'endpoint.created', 'endpoint.updated', 'endpoint.deleted', 'endpoint.disabled', 'endpoint.enabled',
  'message.attempt.exhausted', 'message.attempt.failing', 'message.attempt.recovered',
];
const OPERATIONS_APP_UID = 'hookd-operations';

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

/** The catalog event types `app`'s endpoints and destinations may receive (empty if unreadable). */
async function catalogFor(app, params) {
  let catalog = [];
  try {
    catalog = (await get(`/event-type?limit=250${params || ''}`)).data;
  } catch (error) {
    if (error.status === 401) throw error;
  }
  if (app.uid === OPERATIONS_APP_UID) return catalog;
  return catalog.filter((et) => !OPERATIONAL_EVENT_TYPES.includes(et.name));
}

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
 * the messages that name no field of the form. A field is found by its whole path
 * (`config.uri`), else by its first name through `aliases` (the API's name to the form's).
 */
function showFieldErrors(fields, error, aliases) {
  const details = error.body && Array.isArray(error.body.detail) ? error.body.detail : [];
  const unplaced = [];
  let first = null;
  for (const detail of details) {
    const path = (detail.loc || []).slice(1);
    const name = path[0];
    const target = fields[path.join('.')] || fields[(aliases || {})[name] || name];
    if (!target) {
      unplaced.push(`${path.join('.') || 'request'}: ${detail.msg}`);
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

/** A refusal found before asking the API, shaped as the API's 422 about `path` (`config.uri`). */
function refusal(path, msg) {
  return new ApiError(422, { detail: [{ loc: ['body', ...path.split('.')], msg }] });
}

/** Runs `save` for a form's submit: errors beside fields, the rest in `status`. */
async function submitChecked(button, fields, status, failed, save, aliases) {
  button.disabled = true;
  clearFieldErrors(fields);
  replace(status);
  try {
    await save();
  } catch (error) {
    if (error.status === 401) return;
    const unplaced = error.status === 422 ? showFieldErrors(fields, error, aliases) : [error.message];
    if (unplaced.length) replace(status, notice('error', unplaced.join('; ')));
    announce(failed);
  } finally {
    button.disabled = false;
  }
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

/** The boxes ticked, or null for every event type. */
function pickedEventTypes(form) {
  const picked = [...form.querySelectorAll('input[name="eventTypes"]:checked')].map((box) => box.value);
  return picked.length ? picked : null;
}

/** The list typed in a comma-separated field, or null when empty. */
function listOrNull(text) {
  const list = text.split(',').map((t) => t.trim()).filter(Boolean);
  return list.length ? list : null;
}

function numberOrNull(text) {
  return text.trim() === '' ? null : Number(text);
}

/** A text-like input holding `value` (nothing for null). */
function valued(attrs, value) {
  const control = h('input', attrs);
  control.value = value === null || value === undefined ? '' : value;
  return control;
}

/**
 * Pause or resume `noun` (paused when `paused`): `change(pausing)` makes the API call; the page
 * is drawn again after it.
 */
function pauseAction(noun, paused, change) {
  const pausing = !paused;
  const Noun = capitalized(noun);
  return action(pausing ? 'Pause' : 'Resume',
    pausing ? `Stop sending to this ${noun}. Messages published meanwhile are not queued for it.`
      : `Send to this ${noun} again. Recover its failed messages if it missed any.`,
    null, pausing ? `Pause ${noun}` : `Resume ${noun}`,
    async () => {
      await change(pausing);
      const done = pausing ? `${Noun} paused.` : `${Noun} resumed.`;
      flash('success', done);
      announce(done);
      await route();
    }, pausing ? 'secondary' : null);
}

function capitalized(text) {
  return text[0].toUpperCase() + text.slice(1);
}

/** Delete `noun` `name` at `path`, behind a confirmation that says what goes; then `back`. */
function deleteAction(noun, name, path, back) {
  const status = h('div', {});
  const confirmBox = h('div', { class: 'confirm', role: 'group', 'aria-label': 'Confirm deletion', hidden: true, tabindex: -1 });
  const start = h('button', { type: 'button', class: 'danger' }, `Delete ${noun}`);
  const cancel = h('button', { type: 'button', class: 'secondary' }, 'Cancel');
  const really = h('button', { type: 'button', class: 'danger' }, 'Delete for good');
  replace(confirmBox,
    h('p', {}, 'Delete ', h('strong', {}, name), '? hookd stops sending to it at once and forgets its secret and its delivery log. This cannot be undone.'),
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
      await call('DELETE', path);
      flash('success', `${capitalized(noun)} ${name} deleted.`);
      announce(`${capitalized(noun)} deleted.`);
      location.hash = back;
    } catch (error) {
      if (error.status !== 401) replace(status, notice('error', error.message));
      really.disabled = false;
    }
  });
  return h('div', { class: 'form-like' }, h('fieldset', {}, h('legend', {}, 'Delete'),
    h('p', {}, `Remove this ${noun} and everything hookd keeps about it.`),
    h('div', { class: 'row' }, start), confirmBox, status));
}
