// The viewer page: state, the address bar (?store=, &store2=, &page=, &seed=, &step=, &i=),
// opening stores (URL, folder picker, <input webkitdirectory>, drop), paging, jumping, sampling,
// and the error banner. Decoding happens in the package's worker (threaded when the page is
// cross-origin isolated); this thread only draws.
import { Mask, Sampler, filterRecords, warmWorker } from '../src/browser.js';
import { $, el, fmtInt } from './util.js';
import { Interp } from './render.js';
import { canPickDirectory, describeError, hasSecrets, openStore, pickDirectory, shownUrl, sourceFromDrop } from './open.js';
import { Overview } from './overview.js';
import { Statistics } from './statistics.js';
import { Inspector, fromB64, placeOf, toB64 } from './inspector.js';
import { Grid } from './grid.js';
import { Detail } from './detail.js';
import { StreamsBar, openStream } from './streams.js';

const PAGE_SIZES = [24, 48, 96, 192];
/** Largest decoded page, so pages of big records stay well under the worker's 512 MiB cap. */
const PAGE_BYTES = 96 << 20;
const MAX_STREAMS = 4;

/** @typedef {import('./open.js').Stream} Stream */
/** @typedef {import('./open.js').Openable} Openable */
/** @typedef {import('./grid.js').RenderInfo} RenderInfo */
/**
 * What the address bar holds (each null when absent).
 * @typedef {object} Restore
 * @property {string | null} store
 * @property {string[]} streams  store2=, store3=, ...
 * @property {number | null} page  0-based
 * @property {number | null} seed
 * @property {number | null} step
 * @property {number | null} size
 * @property {string | null} show
 * @property {boolean | null} contrast  auto-contrast asked on or off (null: by the values' range)
 * @property {number | null} i  the open record
 * @property {string | null} run  the step inspector's run (JSON text)
 * @property {{step: number, rank: number} | null} place  the step inspector's place (#step=&rank=)
 * @property {string | null} filter  a filter over the streams (?filter=)
 */

/**
 * @type {{
 *   main: Stream | null, streams: Stream[], mode: 'pages' | 'sample' | 'inspect' | 'list', page: number, size: number,
 *   inspect: import('./inspector.js').Shown | null,
 *   list: {what: string, filter: string | null, indices: number[], page: number} | null,
 *   seed: number, step: number, show: string, contrast: boolean | null, highlight: number | null, detail: number | null,
 *   lastRender: {key: string, ms: number, fetchMs: number, renderMs: number, at: number} | null,
 * }}
 */
const state = {
  main: null,
  streams: [],
  mode: 'pages',
  page: 0,
  size: 48,
  seed: 42,
  step: 0,
  show: 'auto',
  contrast: null,
  highlight: null,
  detail: null,
  lastRender: null,
  inspect: null,
  list: null,
};
let nextId = 1;
/** What waits for the first page of a store opened (its overview). @type {(() => void) | null} */
let afterFirstPage = null;
function runAfterFirstPage() {
  const run = afterFirstPage;
  afterFirstPage = null;
  run?.();
}
/** @type {Sampler | null} */
let sampler = null;
let samplerKey = '';

// ------------------------------------------------------------------ the error banner

const banner = $('#banner');
const bannerParts = {
  title: $('.banner-title', HTMLElement, banner),
  code: $('.banner-code', HTMLElement, banner),
  message: $('.banner-message', HTMLElement, banner),
  hint: $('.banner-hint', HTMLElement, banner),
};
/**
 * Shows a readable error in the banner; `context` says what was being done.
 * @param {any} e  anything thrown (see describeError)
 * @param {string} [context]
 * @param {string} [kind]  'page' for errors of the records on the page (cleared when a page reads)
 */
function showError(e, context = '', kind = '') {
  const d = describeError(e, context);
  banner.dataset.kind = kind;
  bannerParts.title.textContent = d.title;
  const when = d.context ? `while ${d.context[0].toLowerCase()}${d.context.slice(1)}` : '';
  bannerParts.code.textContent = [when, d.code.startsWith('LOADERX_') ? d.code : ''].filter(Boolean).join(' · ');
  bannerParts.message.textContent = d.message;
  bannerParts.hint.textContent = d.hint;
  banner.dataset.code = d.code;
  banner.hidden = false;
  if (!e?.code) console.warn(`${d.title}: ${d.message}`);
}
function clearError() {
  banner.hidden = true;
  delete banner.dataset.code;
  banner.dataset.kind = '';
}
$('.banner-close', HTMLElement, banner).onclick = clearError;

const status = $('#status');
const setStatus = (/** @type {string} */ text, busy = false) => {
  status.textContent = text;
  status.classList.toggle('busy', busy);
};

// ------------------------------------------------------------------ views

const overview = new Overview($('#overview'), $('#lengths'), {
  onError: showError,
  onOpenRecord: (i) => openDetail(i),
});
const statistics = new Statistics($('#statistics'), {
  onError: showError,
  onOpenRecord: (i) => openDetail(i),
  onShowList: (what, indices) => showList(what, null, indices),
});
// Tests read the shown profile.
Object.assign(globalThis, { loaderxStatistics: statistics });
/** Token counts of the main store's records (a packed run's document lengths), per store. */
const docLengths = new WeakMap();
const inspector = new Inspector($('#inspector'), {
  onShow: (shown) => {
    state.mode = 'inspect';
    state.inspect = shown;
    state.highlight = null;
    refresh();
  },
  onError: showError,
  lengths: async () => {
    const store = state.main?.store;
    if (!store) throw Object.assign(new Error('open the run\'s store first: its documents\' lengths decide the packed rows'), { code: 'VIEWER_INPUT' });
    let got = docLengths.get(store);
    if (!got) {
      const rowBytes = store.schema?.itemBytes || 1;
      got = store.lengths(Float64Array.from({ length: store.length }, (_, i) => i)).then((bytes) => Array.from(bytes, (b) => b / rowBytes), (e) => {
        docLengths.delete(store);
        throw e;
      });
      docLengths.set(store, got);
    }
    return got;
  },
});
const grid = new Grid($('#grid'), {
  onOpen: (i) => openDetail(i),
  onPick: () => pickedChanged(),
  onRendered: (info) => rendered(info),
});
const detail = new Detail($('#detail', HTMLDialogElement), {
  onClose: () => { state.detail = null; syncUrl(); },
  onMove: (i) => { state.detail = i; syncUrl(); },
  contrast: () => state.contrast,
  onContrast: (on) => setContrast(on),
});
const streamsBar = new StreamsBar($('#streams'), {
  onAdd: (entry) => {
    if (state.streams.length >= MAX_STREAMS) {
      entry.store.close();
      showError(Object.assign(new Error(`at most ${MAX_STREAMS} extra streams`), { code: 'VIEWER_INPUT' }), 'Adding a stream');
      return;
    }
    state.streams.push(enrich(entry));
    clearError();
    streamsChanged();
  },
  onRemove: (k) => {
    const [gone] = state.streams.splice(k, 1);
    gone?.store.close();
    streamsChanged();
  },
  onError: showError,
});

/**
 * @param {import('./open.js').Opened} entry
 * @returns {Stream}
 */
function enrich(entry) {
  return Object.assign(entry, { id: nextId++, interp: new Interp(entry.store.schema) });
}

/** The main store, then the extra streams (none without a main store). */
const allStreams = () => (state.main ? [state.main, ...state.streams] : []);

function streamsChanged() {
  if (!state.main) throw new Error('viewer: the streams changed without a main store');
  streamsBar.render(state.main, state.streams);
  grid.setStreams(allStreams());
  detail.setStreams(allStreams());
  $('#stream-form').hidden = state.streams.length >= MAX_STREAMS;
  refresh();
}

// ------------------------------------------------------------------ opening

/**
 * Opens the main store (replacing the open ones once it opened). `restore` carries the page,
 * sample, extra streams and open record from the address bar.
 * @param {Openable} what
 * @param {Partial<Restore>} [restore]
 */
async function openMain(what, restore = {}) {
  setStatus('opening…', true);
  // The open stores' background reads (overview, statistics: the whole table over a slow link)
  // stop now rather than compete with the new store's first page; a failed open restarts them.
  const before = state.main;
  afterFirstPage = null;
  overview.clear();
  statistics.stop();
  grid.interrupt();
  for (const s of allStreams()) /** @type {any} */ (s.store).interrupt?.();
  let entry;
  try {
    entry = await openStore(what);
  } catch (e) {
    setStatus('');
    const label = typeof what === 'string' ? shownUrl(what) : 'the chosen folder';
    showError(e, `Opening ${label}`);
    if (before && state.main === before) {
      overview.show(before);
      statistics.show(before);
    }
    return false;
  }
  const old = allStreams();
  if (detail.isOpen) $('#detail', HTMLDialogElement).close();
  state.main = enrich(entry);
  state.streams = [];
  for (const s of old) s.store.close();
  grid.picked.clear();
  pickedChanged();
  clearError();
  state.mode = 'pages';
  state.page = 0;
  state.step = 0;
  state.highlight = null;
  if (restore.size && PAGE_SIZES.includes(restore.size)) state.size = restore.size;
  if (restore.show) state.show = restore.show;
  if (restore.contrast != null) state.contrast = restore.contrast;
  if (restore.seed != null) state.seed = restore.seed;
  if (restore.step != null) { state.mode = 'sample'; state.step = restore.step; }
  if (restore.page != null) state.page = restore.page;
  $('#url-input', HTMLInputElement).value = entry.shown ?? '';
  $('#size-select', HTMLSelectElement).value = String(state.size);
  $('#show-select', HTMLSelectElement).value = state.show;
  $('#seed-input', HTMLInputElement).value = String(state.seed);
  $('#welcome').hidden = true;
  $('#store-view').hidden = false;
  $('#store-name').textContent = entry.label;
  $('#store-source').textContent = entry.shown ? `over HTTP: ${entry.shown}` : 'local files';
  document.title = `${entry.label} · loaderx viewer`;
  // The overview and the statistics panel read the whole table and checksums (stats, digest):
  // over a slow link that would delay the first page, so they start once it is drawn.
  const shown = state.main;
  overview.clear();
  afterFirstPage = () => {
    if (state.main !== shown) return;
    overview.show(shown);
    statistics.show(shown);
  };
  setTimeout(runAfterFirstPage, 3000);
  setStatus(entry.store.threaded ? 'threaded worker' : 'worker');
  status.title = entry.store.threaded ? 'decoding on a wasm thread pool in a Web Worker' : 'decoding in a Web Worker';
  for (const url of restore.streams ?? []) {
    try {
      state.streams.push(enrich(await openStream(state.main, url)));
    } catch (e) {
      showError(e, `Adding the stream ${shownUrl(url)}`);
    }
  }
  streamsChanged();
  if (restore.i != null && restore.i < entry.store.length) openDetail(restore.i);
  if (restore.run) inspector.restore(restore.run, restore.place?.step ?? 0, restore.place?.rank ?? 0);
  else if (restore.filter) runFilter(restore.filter, restore.page ?? 0);
  return true;
}

// ------------------------------------------------------------------ paging

const length = () => state.main?.store.length ?? 0;
const pageCount = () => Math.max(1, Math.ceil((state.mode === 'list' && state.list ? state.list.indices.length : length()) / effectiveSize()));

/** Records per page: the chosen size, fewer when records are big. */
function effectiveSize() {
  // Decoded values can be twice the stored bytes (float16 widens to float32).
  const schema = state.main?.store.schema;
  const perRecord = schema?.kind === 'dense' ? schema.itemBytes * 2 : 0;
  return perRecord ? Math.max(1, Math.min(state.size, Math.floor(PAGE_BYTES / perRecord))) : state.size;
}

function getSampler() {
  const key = `${length()}:${effectiveSize()}:${state.seed}`;
  if (key !== samplerKey || !sampler) {
    sampler?.free();
    sampler = new Sampler(length(), effectiveSize(), 'CYCLIC', state.seed);
    samplerKey = key;
  }
  return sampler;
}

/**
 * The indices and cache key of a page (pages mode) or sampler step (sample mode).
 * @param {'pages' | 'sample' | 'inspect' | 'list'} mode
 * @param {number} n  the page or step
 */
function target(mode, n) {
  const size = effectiveSize();
  if (mode === 'list' && state.list) {
    const l = state.list;
    const start = n * size;
    return { key: `list:${l.what}:${l.indices.length}:${n}:${size}`, indices: l.indices.slice(start, start + size) };
  }
  if (mode === 'inspect' && state.inspect) {
    const s = state.inspect;
    return { key: `inspect:${s.step}:${s.rank}:${s.shardCount}:${s.indices.length}:${s.indices[0]}`, indices: s.indices };
  }
  if (mode === 'sample') {
    return { key: `sample:${state.seed}:${n}:${size}`, indices: Array.from(getSampler().batchAt(n)) };
  }
  const start = n * size;
  const end = Math.min(length(), start + size);
  return { key: `page:${n}:${size}`, indices: Array.from({ length: Math.max(0, end - start) }, (_, k) => start + k) };
}

/** The text of the sample button (its last child, after the icon). */
const sampleLabel = (() => {
  const label = $('#sample-btn').lastChild;
  if (!label) throw new Error('viewer: #sample-btn has no label');
  return label;
})();

function updateToolbar() {
  const n = length();
  const sample = state.mode === 'sample' || state.mode === 'inspect';
  const pages = pageCount();
  const page = state.mode === 'list' && state.list ? state.list.page : state.page;
  $('#page-word').textContent = sample ? 'Step' : 'Page';
  const input = $('#page-input', HTMLInputElement);
  input.min = sample ? '0' : '1';
  input.max = sample ? '' : String(pages);
  const step = state.mode === 'inspect' ? (state.inspect?.step ?? 0) : state.step;
  input.value = String(sample ? step : page + 1);
  $('#page-total').textContent = state.mode === 'inspect' ? `· rank ${state.inspect?.rank ?? 0}` : sample ? `· seed ${state.seed}` : `of ${fmtInt(pages)}`;
  $('#first', HTMLButtonElement).disabled = sample ? step === 0 : page === 0;
  $('#prev', HTMLButtonElement).disabled = $('#first', HTMLButtonElement).disabled;
  $('#next', HTMLButtonElement).disabled = !n || (!sample && page >= pages - 1);
  $('#last', HTMLButtonElement).disabled = sample || $('#next', HTMLButtonElement).disabled;
  $('#sample-btn', HTMLButtonElement).disabled = !n;
  $('#pages-btn').hidden = !sample && state.mode !== 'list';
  $('#mask-btn').hidden = !(state.mode === 'list' && state.list?.indices.length);
  sampleLabel.textContent = sample ? ' Next sample' : ' Random sample';
  $('.records').classList.toggle('sampling', sample);
}

/** Shows the current page or sample. */
async function refresh() {
  if (!state.main) return;
  const n = length();
  if (state.mode === 'pages') state.page = Math.max(0, Math.min(state.page, pageCount() - 1));
  updateToolbar();
  syncUrl();
  const size = effectiveSize();
  if (!n) {
    runAfterFirstPage();
    grid.setStreams(allStreams());
    $('#grid').replaceChildren(el('div', { class: 'empty' }, 'This store has no records.'));
    $('#grid-range').textContent = 'No records';
    $('#grid-note').textContent = '';
    return;
  }
  const t = target(state.mode, state.mode === 'sample' ? state.step : state.mode === 'list' && state.list ? state.list.page : state.page);
  if (state.mode === 'list' && state.list) {
    const l = state.list;
    const a = l.page * size;
    $('#grid-range').textContent = l.indices.length
      ? `${fmtInt(a + 1)}–${fmtInt(a + t.indices.length)} of ${fmtInt(l.indices.length)} records: ${l.what}`
      : `No records: ${l.what}`;
    $('#grid-note').textContent = '';
    if (!l.indices.length) {
      grid.setStreams(allStreams());
      $('#grid').replaceChildren(el('div', { class: 'empty' }, `No record matches ${l.what}.`));
      return;
    }
  } else if (state.mode === 'inspect' && state.inspect) {
    const s = state.inspect;
    $('#grid-range').textContent = `${fmtInt(t.indices.length)} records of step ${fmtInt(s.step)}, rank ${s.rank} of ${s.shardCount}`;
    $('#grid-note').textContent = 'what the training run read (step inspector)';
  } else if (state.mode === 'sample') {
    $('#grid-range').textContent = `${fmtInt(t.indices.length)} random records`;
    $('#grid-note').replaceChildren('CYCLIC sampler, the same batches as Python and Rust: ',
      el('code', {}, `Sampler(${n}, ${size}, 'CYCLIC', ${state.seed}).batchAt(${state.step})`));
  } else {
    const a = t.indices[0];
    $('#grid-range').textContent = `Records ${fmtInt(a)}–${fmtInt(a + t.indices.length - 1)} of ${fmtInt(n)}`;
    $('#grid-note').textContent = size < state.size ? `(${size} per page: the records are large)` : '';
  }
  setStatus(state.main.store.threaded ? 'threaded worker' : 'worker', true);
  let info;
  try {
    info = await grid.show({ key: t.key, indices: t.indices, highlight: state.highlight, show: state.show, contrast: state.contrast });
  } catch (e) {
    runAfterFirstPage();
    setStatus(state.main?.store.threaded ? 'threaded worker' : 'worker');
    showError(e, 'Reading records');
    return;
  }
  runAfterFirstPage();
  if (!info) return;
  setStatus(state.main.store.threaded ? 'threaded worker' : 'worker');
  // Read the next page (or sample) ahead while this one is looked at.
  const next = state.mode === 'sample' ? state.step + 1 : state.page + 1;
  if (state.mode !== 'inspect' && state.mode !== 'list' && (state.mode === 'sample' || next < pageCount())) {
    const ahead = target(state.mode, next);
    grid.prefetch(ahead.key, ahead.indices);
  }
}

/**
 * After the grid drew a page: normalization notes, timing, and errors of unreadable records.
 * @param {RenderInfo} info
 */
function rendered(info) {
  state.lastRender = { key: info.key, ms: info.ms, fetchMs: info.fetchMs, renderMs: info.renderMs, at: performance.now() };
  $('#grid-timing').textContent = `${Math.round(info.ms)} ms`;
  $('#grid-timing').title = `read and decoded in ${Math.round(info.fetchMs)} ms (in the worker, or ahead of time), drawn in ${Math.round(info.renderMs)} ms`;
  showContrast(info.contrast.images, info.contrast.stretched);
  const notes = info.notes.map((n) => (state.streams.length ? `${n.stream}: ${n.note}` : n.note));
  const noteEl = $('#grid-note');
  noteEl.querySelector('.norm')?.remove();
  if (notes.length) noteEl.append(el('span', { class: 'norm' }, `${noteEl.textContent ? ' · ' : ''}${notes.join(' · ')}`));
  if (info.errors.length) {
    const first = info.errors[0];
    const label = allStreams()[first.stream]?.label ?? '';
    const e = Object.assign(new Error(`${info.errors.length} of ${info.indices.length} records on this page could not be read` +
      `${state.streams.length ? ` (${label})` : ''}; the first is record ${first.index}: ${first.error.message}`), { code: first.error.code, index: first.index });
    showError(e, 'Reading records', 'page');
  } else if (!banner.hidden && banner.dataset.kind === 'page') {
    clearError();
  }
}

const contrastBtn = $('#contrast-btn', HTMLButtonElement);
/**
 * The auto-contrast toggle: shown when the page has images, pressed while they are stretched.
 * @param {boolean} images
 * @param {boolean} on
 */
function showContrast(images, on) {
  contrastBtn.hidden = !images;
  contrastBtn.setAttribute('aria-pressed', String(on));
  contrastBtn.dataset.state = on ? 'on' : 'off';
  $('.toggle-state', HTMLElement, contrastBtn).textContent = on ? 'on' : 'off';
}
/** @param {boolean} on  auto-contrast from now on, in the grid and the detail view */
function setContrast(on) {
  state.contrast = on;
  refresh();
}
contrastBtn.addEventListener('click', () => setContrast(contrastBtn.dataset.state !== 'on'));

/** @param {number} p */
function goPage(p) {
  state.mode = 'pages';
  state.page = p;
  state.highlight = null;
  refresh();
}

/** @param {number} delta  pages or steps */
function move(delta) {
  if (!state.main) return;
  if (state.mode === 'list' && state.list) {
    state.list.page = Math.max(0, Math.min(pageCount() - 1, state.list.page + delta));
    refresh();
  } else if (state.mode === 'inspect' && state.inspect) {
    inspector.show(Math.max(0, state.inspect.step + delta), state.inspect.rank);
  } else if (state.mode === 'sample') {
    state.step = Math.max(0, state.step + delta);
    refresh();
  } else {
    goPage(Math.max(0, Math.min(pageCount() - 1, state.page + delta)));
  }
}

/** @param {number} i  a record index (as typed: maybe not one) */
function jump(i) {
  const n = length();
  if (!Number.isInteger(i) || i < 0 || i >= n) {
    showError(Object.assign(new Error(`there is no record ${i}: this store has ${fmtInt(n)} records (0 to ${fmtInt(n - 1)})`), { code: 'LOADERX_INDEX' }), 'Jumping');
    return;
  }
  state.mode = 'pages';
  state.page = Math.floor(i / effectiveSize());
  state.highlight = i;
  refresh();
}

function sample() {
  const seed = parseSeed();
  if (seed == null) return;
  if (state.mode === 'sample' && seed === state.seed) state.step += 1;
  else {
    state.mode = 'sample';
    state.seed = seed;
    state.step = 0;
  }
  state.highlight = null;
  refresh();
}

function parseSeed() {
  const text = $('#seed-input', HTMLInputElement).value.trim();
  const seed = Number(text);
  if (!/^\d+$/.test(text) || !Number.isSafeInteger(seed)) {
    showError(Object.assign(new Error(`the seed must be a whole number from 0 to ${Number.MAX_SAFE_INTEGER}, not "${text}"`), { code: 'VIEWER_INPUT' }), 'Sampling');
    return null;
  }
  return seed;
}

/** @param {number} i */
function openDetail(i) {
  if (!state.main || i < 0 || i >= length()) return;
  state.detail = i;
  detail.open(i);
  syncUrl();
}

// ------------------------------------------------------------------ filters and lists

/** The streams by the names a filter uses: each stream's own name (letters, digits, _ . -,
 *  starting with a letter) and s1, s2, ... in the order shown. */
function filterNames() {
  /** @type {Record<string, any>} */
  const out = {};
  allStreams().forEach((s, k) => {
    out[`s${k + 1}`] = s.store;
    let name = s.short.replace(/[^A-Za-z0-9_.-]/g, '_');
    if (!/^[A-Za-z_]/.test(name)) name = `_${name}`;
    if (!(name in out)) out[name] = s.store;
  });
  return out;
}

/** Shows `indices` in the grid, page by page (`what` says which; `filter` is kept in the URL). */
function showList(/** @type {string} */ what, /** @type {string | null} */ filter, /** @type {number[]} */ indices, page = 0) {
  state.mode = 'list';
  state.list = { what, filter, indices, page };
  state.highlight = null;
  refresh();
}

/** The records picked by hand: their count, and the buttons that use them. */
function pickedChanged() {
  const n = grid.picked.size;
  $('#pick-bar').hidden = n === 0;
  const note = $('#pick-note');
  note.dataset.v = String(n);
  note.textContent = `${fmtInt(n)} picked`;
}
const pickedList = () => [...grid.picked].sort((a, b) => a - b);
$('#pick-show').addEventListener('click', () => showList(`${fmtInt(grid.picked.size)} records picked by hand`, null, pickedList()));
$('#pick-clear').addEventListener('click', () => {
  grid.picked.clear();
  for (const t of document.querySelectorAll('#grid .tile.picked')) t.classList.remove('picked');
  pickedChanged();
});
$('#pick-mask').addEventListener('click', () => saveMask(pickedList(), $('#pick-mask', HTMLButtonElement)));

/**
 * Saves records as an exclusion mask of the main store (a download).
 * @param {number[]} indices
 * @param {HTMLButtonElement} btn
 */
async function saveMask(indices, btn) {
  if (!state.main) return;
  btn.disabled = true;
  try {
    const mask = await Mask.build(state.main.store, indices);
    const a = el('a', { href: URL.createObjectURL(new Blob([/** @type {BlobPart} */ (mask.toBytes())], { type: 'application/octet-stream' })), download: `${state.main.short}.lxmask` });
    mask.free();
    a.click();
    setTimeout(() => URL.revokeObjectURL(a.href), 10_000);
  } catch (e) {
    showError(e, 'Saving the mask');
  } finally {
    btn.disabled = false;
  }
}
$('#mask-btn').addEventListener('click', () => {
  if (state.mode === 'list' && state.list) saveMask(state.list.indices, $('#mask-btn', HTMLButtonElement));
});

let filterRun = 0;
/** Runs a filter over the streams and shows its matches. */
async function runFilter(/** @type {string} */ text, page = 0) {
  const note = $('#filter-note');
  $('#filter-input', HTMLInputElement).value = text;
  const run = ++filterRun;
  note.dataset.v = '';
  note.textContent = 'filtering…';
  try {
    const t0 = performance.now();
    const found = await filterRecords(filterNames(), text, {
      onProgress: (done, total, hits) => { if (run === filterRun) note.textContent = `filtering… ${fmtInt(done)} / ${fmtInt(total)} (${fmtInt(hits)} found)`; },
    });
    if (run !== filterRun) return;
    note.dataset.v = String(found.length);
    note.textContent = `${fmtInt(found.length)} of ${fmtInt(length())} records match (${((performance.now() - t0) / 1000).toFixed(2)} s)`;
    showList(`filter ${text}`, text, Array.from(found), page);
  } catch (e) {
    if (run !== filterRun) return;
    note.dataset.v = 'error';
    note.textContent = '';
    showError(e, 'Filtering');
  }
}

// ------------------------------------------------------------------ the address bar

function syncUrl() {
  const q = new URLSearchParams();
  if (state.main?.url) {
    q.set('store', state.main.url);
    state.streams.forEach((s, k) => { if (s.url) q.set(`store${k + 2}`, s.url); });
  }
  if (state.main) {
    if (state.mode === 'list' && state.list?.filter) {
      q.set('filter', state.list.filter);
      if (state.list.page) q.set('page', String(state.list.page + 1));
    } else if (state.mode === 'inspect' && inspector.text) q.set('run', toB64(inspector.text));
    else if (state.mode === 'sample') {
      q.set('seed', String(state.seed));
      q.set('step', String(state.step));
    } else if (state.page) q.set('page', String(state.page + 1));
    if (state.size !== 48) q.set('size', String(state.size));
    if (state.show !== 'auto') q.set('show', state.show);
    if (state.contrast != null) q.set('contrast', state.contrast ? 'on' : 'off');
    if (state.detail != null) q.set('i', String(state.detail));
  }
  const text = q.toString().replace(/%2F/g, '/').replace(/%3A/g, ':');
  const hash = state.mode === 'inspect' && state.inspect ? `#step=${state.inspect.step}&rank=${state.inspect.rank}` : '';
  const url = `${location.pathname}${text ? `?${text}` : ''}${hash}`;
  if (url !== `${location.pathname}${location.search}${location.hash}`) history.replaceState(null, '', url);
}

/** @returns {Restore} */
function fromUrl() {
  const q = new URLSearchParams(location.search);
  const int = (/** @type {string} */ k) => {
    const v = q.get(k);
    return v != null && /^\d+$/.test(v) ? Number(v) : null;
  };
  const streams = [];
  for (let k = 2; k <= MAX_STREAMS + 1; k++) {
    const url = q.get(`store${k}`);
    if (url) streams.push(url);
  }
  const page = int('page');
  const show = q.get('show');
  const contrast = q.get('contrast');
  return {
    store: q.get('store'),
    streams,
    page: page != null ? Math.max(0, page - 1) : null,
    seed: int('seed'),
    step: int('step') ?? (int('seed') != null ? 0 : null),
    size: int('size'),
    show: show != null && ['auto', 'image', 'values'].includes(show) ? show : null,
    contrast: contrast === 'on' ? true : contrast === 'off' ? false : null,
    i: int('i'),
    run: (() => {
      const run = q.get('run');
      try {
        return run ? fromB64(run) : null;
      } catch {
        return null;
      }
    })(),
    place: placeOf(location.hash),
    filter: q.get('filter'),
  };
}

// ------------------------------------------------------------------ controls

$('#filter-form').addEventListener('submit', (ev) => {
  ev.preventDefault();
  const text = $('#filter-input', HTMLInputElement).value.trim();
  if (!state.main) return;
  if (!text) {
    filterRun++;
    $('#filter-note').textContent = '';
    return goPage(0);
  }
  runFilter(text);
});

$('#url-form').addEventListener('submit', (ev) => {
  ev.preventDefault();
  const text = $('#url-input', HTMLInputElement).value;
  // The box shows an open store's URL redacted: submitted unchanged, it means that store's URL.
  openMain(state.main?.href && text.trim() === state.main.shown ? state.main.href : text);
});
const openFolder = async () => {
  if (!canPickDirectory()) return dirInput.click();
  try {
    const handle = await pickDirectory();
    if (handle) openMain(handle);
  } catch (e) {
    showError(e, 'Opening a folder');
  }
};
$('#open-dir').addEventListener('click', openFolder);
$('#welcome-dir').addEventListener('click', openFolder);
const dirInput = $('#dir-input', HTMLInputElement);
dirInput.addEventListener('change', () => {
  const files = dirInput.files;
  if (files?.length) openMain(Array.from(files)); // (never null for a file input)
  dirInput.value = '';
});

$('#first').addEventListener('click', () => {
  if (state.mode === 'list' && state.list) return move(-state.list.page);
  if (state.mode !== 'sample') return goPage(0);
  state.step = 0;
  return refresh();
});
$('#prev').addEventListener('click', () => move(-1));
$('#next').addEventListener('click', () => move(1));
$('#last').addEventListener('click', () => (state.mode === 'list' && state.list ? move(pageCount()) : goPage(pageCount() - 1)));
$('#page-input', HTMLInputElement).addEventListener('change', (ev) => {
  const v = Number(/** @type {HTMLInputElement} */ (ev.currentTarget).value);
  if (!Number.isInteger(v)) return updateToolbar();
  if (state.mode === 'inspect' && state.inspect) return inspector.show(Math.max(0, v), state.inspect.rank);
  if (state.mode === 'list' && state.list) return move(v - 1 - state.list.page);
  if (state.mode === 'sample') {
    state.step = Math.max(0, v);
    refresh();
  } else goPage(Math.max(0, Math.min(pageCount() - 1, v - 1)));
});
$('#jump-form').addEventListener('submit', (ev) => {
  ev.preventDefault();
  const text = $('#jump-input', HTMLInputElement).value.trim();
  if (text) jump(Number(text));
});
$('#sample-btn').addEventListener('click', sample);
$('#pages-btn').addEventListener('click', () => goPage(state.page));
$('#seed-input').addEventListener('change', () => {
  if (state.mode !== 'sample') return;
  const seed = parseSeed();
  if (seed == null) return;
  state.seed = seed;
  state.step = 0;
  refresh();
});
$('#show-select', HTMLSelectElement).addEventListener('change', (ev) => {
  state.show = /** @type {HTMLSelectElement} */ (ev.currentTarget).value;
  refresh();
});
$('#size-select', HTMLSelectElement).addEventListener('change', (ev) => {
  const first = state.page * effectiveSize();
  state.size = Number(/** @type {HTMLSelectElement} */ (ev.currentTarget).value);
  state.page = Math.floor(first / effectiveSize());
  refresh();
});

document.addEventListener('keydown', (ev) => {
  if (!state.main || detail.isOpen || ev.altKey || ev.ctrlKey || ev.metaKey) return;
  if (ev.target instanceof Element && ev.target.closest('input, select, textarea, [contenteditable]')) return;
  /** @type {Record<string, () => void>} */
  const keys = { ArrowLeft: () => move(-1), ArrowRight: () => move(1), Home: () => $('#first').click(), End: () => $('#last').click() };
  if (keys[ev.key]) {
    ev.preventDefault();
    keys[ev.key]();
  }
});

// Drag and drop: a folder dropped on the streams bar adds a stream, anywhere else opens it.
const overlay = $('#drop-overlay');
const overlayText = $('div', HTMLElement, overlay);
let dragDepth = 0;
const hasFiles = (/** @type {DragEvent} */ ev) => Array.from(ev.dataTransfer?.types ?? []).includes('Files');
window.addEventListener('dragenter', (ev) => {
  if (!hasFiles(ev)) return;
  ev.preventDefault();
  dragDepth++;
  overlay.hidden = false;
  overlayText.textContent = state.main && ev.target instanceof Element && ev.target.closest('#streams') ? 'Drop a store folder to add it as a stream' : 'Drop the store folder to open it';
});
window.addEventListener('dragover', (ev) => {
  if (!hasFiles(ev)) return;
  ev.preventDefault();
  if (ev.dataTransfer) ev.dataTransfer.dropEffect = 'copy'; // (set: hasFiles)
});
window.addEventListener('dragleave', () => {
  if (--dragDepth <= 0) { dragDepth = 0; overlay.hidden = true; }
});
window.addEventListener('drop', (ev) => {
  const dataTransfer = ev.dataTransfer;
  if (!dataTransfer || !hasFiles(ev)) return;
  ev.preventDefault();
  dragDepth = 0;
  overlay.hidden = true;
  const toStreams = state.main && document.elementsFromPoint(ev.clientX, ev.clientY).some((n) => n.id === 'streams');
  // The entries must be taken while the drop is handled; reading them is async.
  sourceFromDrop(dataTransfer).then(
    (src) => (toStreams ? streamsBar.add(src) : openMain(src)),
    (e) => showError(e, 'Opening the dropped files'),
  );
});

// For tests and the console.
Object.assign(window, { __viewer: { state, grid, detail, refresh, openMain } });

// The worker (and its threaded wasm build) starts with the page, not with the first store.
if (globalThis.crossOriginIsolated) warmWorker().catch(() => {});

const initial = fromUrl();
// A URL with secrets is read, never shown: it leaves the address bar at once (so a reload
// does not reopen it; loaderx-view passes such stores by name instead).
if ([initial.store ?? '', ...initial.streams].some(hasSecrets)) history.replaceState(null, '', location.pathname);
if (initial.store) {
  $('#url-input', HTMLInputElement).value = shownUrl(initial.store);
  openMain(initial.store, initial);
}
