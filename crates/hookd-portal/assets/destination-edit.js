// hookd portal: a customer looks after their own destinations.
//
// The form that adds a destination (its type first, then that type's configuration) or edits
// one, and the destination page's pause, resume and delete. Credentials (a secret access key,
// a broker URI's password) are typed into password fields and never shown back: the API keeps
// them sealed and shows a URI with its password masked, so the form shows the URI without it
// and an edit sends only the configuration fields that changed. Uses forms.js's and
// portal.js's helpers.
'use strict';

/** Every AWS type's optional fields, after its required one. */
const AWS_FIELDS = [
  { name: 'region', label: 'Region', hint: 'us-east-1 when empty.' },
  { name: 'accessKeyId', label: 'Access key id', hint: 'With the secret access key below.' },
  { name: 'secretAccessKey', label: 'Secret access key', secret: true },
  { name: 'endpointUrl', label: 'Service URL', hint: 'Optional: an AWS-compatible service instead of AWS.' },
];

/**
 * The destination types the API serves (docs/destinations.md), each with its configuration
 * fields: `required`, `secret` (a credential), `list` (separated by commas), `check` (yes/no).
 * `batches`: whether messages may be published several at once.
 */
const DESTINATION_TYPES = [
  { type: 'rabbitMq', label: 'RabbitMQ', batches: true, fields: [
    { name: 'uri', label: 'URI', required: true, masked: true, hint: 'amqp:// or amqps://, with the user; its password below.' },
    { name: 'routingKey', label: 'Routing key', required: true, hint: 'On the default exchange: the queue\u2019s name.' },
    { name: 'mandatory', label: 'Mandatory', check: true, hint: 'A message no queue takes is a failed attempt.' },
  ] },
  { type: 'sqs', label: 'Amazon SQS', batches: true, fields: [{ name: 'queueUrl', label: 'Queue URL', required: true }, ...AWS_FIELDS] },
  { type: 'sns', label: 'Amazon SNS', batches: true, fields: [{ name: 'topicArn', label: 'Topic ARN', required: true }, ...AWS_FIELDS] },
  { type: 'amazonS3', label: 'Amazon S3', batches: true, fields: [{ name: 'bucket', label: 'Bucket', required: true }, ...AWS_FIELDS] },
  { type: 'natsJetStream', label: 'NATS JetStream', batches: true, fields: [
    { name: 'url', label: 'NATS URL', required: true, masked: true, hint: 'nats://host:4222; a password below.' },
    { name: 'subject', label: 'Subject', required: true },
  ] },
  { type: 'kafka', label: 'Kafka', batches: true, fields: [
    { name: 'bootstrapServers', label: 'Bootstrap servers', required: true, list: true, hint: 'host:port, separated by commas.' },
    { name: 'topic', label: 'Topic', required: true },
  ] },
  { type: 'fifoEndpoint', label: 'HTTP, one at a time in order', fields: [
    { name: 'url', label: 'Endpoint URL', required: true, hint: 'Where hookd sends each message, signed, starting with https.' },
  ] },
  { type: 'pollingEndpoint', label: 'Polling: your consumer reads from hookd', fields: [] },
];

function destinationType(type) {
  return DESTINATION_TYPES.find((t) => t.type === type);
}

/** A URI as the API shows it, without its (masked) password; and whether it had one. */
function withoutPassword(shown) {
  try {
    const url = new URL(shown);
    const had = url.password !== '';
    url.password = '';
    return { uri: url.href, had };
  } catch (error) {
    return { uri: shown || '', had: false };
  }
}

/** A configuration field's control, holding what the API shows of `config`. */
function configControl(spec, config, editing) {
  const shown = config ? config[spec.name] : undefined;
  if (spec.masked) return valued({ type: 'text', name: spec.name, spellcheck: 'false' }, withoutPassword(shown).uri);
  if (spec.check) return h('input', { type: 'checkbox', class: 'check', name: spec.name, checked: shown === true });
  if (spec.secret) return h('input', { type: 'password', name: spec.name, autocomplete: 'new-password', spellcheck: 'false' });
  const value = spec.list && Array.isArray(shown) ? shown.join(', ') : shown;
  return valued({ type: 'text', name: spec.name, spellcheck: 'false', required: spec.required && !editing }, value);
}

function configHint(spec, editing) {
  if (spec.secret) return editing ? 'Never shown back; leave empty to keep the one hookd holds.' : 'Never shown back.';
  return spec.hint || (spec.required ? null : 'Optional.');
}

/** The type's configuration fields, each with its place for the API's message. */
function configFields(fields, kind, config, editing) {
  for (const name of Object.keys(fields)) if (name.startsWith('config.')) delete fields[name];
  const controls = {};
  const wrappers = kind.fields.flatMap((spec) => {
    controls[spec.name] = configControl(spec, config, editing);
    const wrapper = checkedField(fields, `config.${spec.name}`, spec.label, controls[spec.name], configHint(spec, editing));
    if (!spec.masked) return [wrapper];
    controls[`${spec.name}.password`] = h('input', { type: 'password', name: `${spec.name}Password`, autocomplete: 'new-password' });
    return [wrapper, checkedField(fields, `config.${spec.name}.password`, 'Password', controls[`${spec.name}.password`],
      editing ? 'Never shown back; leave empty to keep the one hookd holds.' : 'Never shown back.')];
  });
  return { controls, view: wrappers.length ? h('div', { class: 'fields wide' }, wrappers) : h('p', {}, 'This type has nothing to configure.') };
}

/** A field's value as the API takes it: null when empty. */
function configValue(spec, control) {
  if (spec.check) return control.checked;
  const text = control.value.trim();
  if (text === '') return null;
  return spec.list ? listOrNull(text) : text;
}

/**
 * A URI field's value with its password field's: unchanged (undefined) when neither was
 * touched while editing. A changed URI replaces the stored one whole, so it needs its password
 * typed again when it had one.
 */
function uriValue(spec, controls, shown) {
  const typed = controls[spec.name].value.trim();
  const password = controls[`${spec.name}.password`].value;
  const before = shown ? withoutPassword(shown[spec.name]) : { uri: '', had: false };
  if (shown && typed === before.uri && password === '') return undefined;
  if (shown && before.had && password === '') throw refusal(`config.${spec.name}.password`, 'type the password again: a changed URI replaces the stored one');
  if (typed === '' || password === '') return typed || null;
  try {
    const url = new URL(typed);
    url.password = password;
    return url.href;
  } catch (error) {
    return typed;
  }
}

/** The configuration to send: every field given when creating, only those changed when editing. */
function configBody(kind, controls, shown) {
  const config = {};
  for (const spec of kind.fields) {
    if (spec.masked) {
      const uri = uriValue(spec, controls, shown);
      if (uri !== undefined && (shown || uri !== null)) config[spec.name] = uri;
      continue;
    }
    const value = configValue(spec, controls[spec.name]);
    if (!shown) {
      if (value !== null) config[spec.name] = value;
      continue;
    }
    if (spec.secret && value === null) continue;
    const before = shown[spec.name] === undefined ? null : shown[spec.name];
    if (JSON.stringify(value) !== JSON.stringify(before)) config[spec.name] = value;
  }
  return config;
}

/** The page that adds a destination (no `destinationId`) or edits one. */
async function renderDestinationForm(appId, destinationId) {
  const app = await get(`/app/${enc(appId)}`);
  const base = destinationId ? `/app/${enc(app.id)}/destination/${enc(destinationId)}` : null;
  const [dest, catalog] = await Promise.all([base ? get(base) : null, catalogFor(app)]);
  const fields = {};
  const typeChoice = h('select', { name: 'type', disabled: Boolean(dest) },
    DESTINATION_TYPES.map((t) => h('option', { value: t.type }, t.label)));
  typeChoice.value = dest ? dest.type : 'rabbitMq';
  const name = valued({ type: 'text', name: 'uid', spellcheck: 'false' }, dest && dest.uid);
  const channels = valued({ type: 'text', name: 'channels', spellcheck: 'false' }, dest && dest.channels ? dest.channels.join(', ') : '');
  const batchSize = valued({ type: 'number', name: 'batchSize', min: 1, max: 1000, step: 1, inputmode: 'numeric' }, dest && dest.batchSize);
  const maxWait = valued({ type: 'number', name: 'maxWaitSecs', min: 0, max: 300, step: 1, inputmode: 'numeric' }, dest && dest.maxWaitSecs);
  const batching = h('div', { class: 'fields' },
    checkedField(fields, 'batchSize', 'Batch size', batchSize, '1 to 1000 messages per publication; 1 when empty.'),
    checkedField(fields, 'maxWaitSecs', 'Batch wait (seconds)', maxWait, '0 to 300: how long a batch waits to fill.'));
  const configSlot = h('fieldset', {}, h('legend', {}, 'Configuration'));
  let config = null;
  const showType = () => {
    const kind = destinationType(typeChoice.value);
    config = configFields(fields, kind, dest && dest.config, Boolean(dest));
    replace(configSlot, h('legend', {}, `${kind.label}: configuration`), config.view);
    batching.hidden = !kind.batches;
  };
  typeChoice.addEventListener('change', showType);
  showType();
  const status = h('div', {});
  const save = h('button', { type: 'submit' }, dest ? 'Save changes' : 'Add destination');
  const back = dest ? `#/app/${enc(app.id)}/destination/${enc(dest.id)}` : `#/app/${enc(app.id)}`;
  const form = h('form', { class: 'endpoint-form', novalidate: true },
    h('div', { class: 'fields wide' },
      checkedField(fields, 'type', 'Type', typeChoice, dest ? 'A destination keeps its type; add another for a new one.' : 'Where hookd puts the messages.'),
      checkedField(fields, 'uid', 'Name', name, 'Optional: a uid of your own (letters, digits, -, _ and .).')),
    configSlot,
    eventTypePicker(fields, catalog, dest && dest.eventTypes),
    h('div', { class: 'fields' },
      checkedField(fields, 'channels', 'Channels', channels, 'Optional, separated by commas: only messages of these channels.')),
    batching,
    h('div', { class: 'row' }, save, h('a', { href: back }, 'Cancel')),
    status);
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    submitChecked(save, fields, status, 'The destination was not saved.', async () => {
      const kind = destinationType(typeChoice.value);
      const body = {
        type: kind.type,
        uid: name.value.trim() || null,
        eventTypes: pickedEventTypes(form),
        channels: listOrNull(channels.value),
        config: configBody(kind, config.controls, dest && dest.config),
      };
      if (kind.batches) Object.assign(body, { batchSize: numberOrNull(batchSize.value), maxWaitSecs: numberOrNull(maxWait.value) });
      const saved = dest ? (await call('PATCH', base, body)).data : (await call('POST', `/app/${enc(app.id)}/destination`, body)).data;
      flash('success', dest ? 'Destination saved.' : 'Destination added.');
      announce(dest ? 'Destination saved.' : 'Destination added.');
      location.hash = `#/app/${enc(app.id)}/destination/${enc(saved.id)}`;
    });
  });
  page(dest ? `Edit destination ${dest.uid || dest.id}` : 'Add a destination',
    crumbsTo(app, dest ? 'Edit destination' : 'New destination'), form);
  (dest ? name : typeChoice).focus();
}

/** The destination page's changes: pause or resume, and delete. */
function destinationChanges(app, dest) {
  const path = `/app/${enc(app.id)}/destination/${enc(dest.id)}`;
  return [
    pauseAction('destination', dest.status !== 'enabled',
      (pausing) => call('PATCH', path, { type: dest.type, status: pausing ? 'disabled' : 'enabled' })),
    deleteAction('destination', dest.uid || dest.id, path, `#/app/${enc(app.id)}`),
  ];
}
