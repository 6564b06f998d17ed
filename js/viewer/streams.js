// Streams side by side: the main store plus stores of the same length (labels, captions, ...)
// whose record i is shown with record i of the main store, in the grid and in the detail view.
import { el, fmtInt, fmtShape } from './util.js';
import { openStore } from './open.js';

/** A store whose length differs from the main store's is refused with this error. */
export function lengthError(main, other) {
  const e = new Error(`${other.label} has ${fmtInt(other.store.length)} records but ${main.label} has ${fmtInt(main.store.length)}: ` +
    'streams shown side by side must have the same length (record i of each belongs together).');
  e.code = 'VIEWER_LENGTH';
  return e;
}

/** Opens `what` as an extra stream of `main`; rejects (and closes it) when the lengths differ. */
export async function openStream(main, what) {
  const entry = await openStore(what);
  if (entry.store.length !== main.store.length) {
    const err = lengthError(main, entry);
    await entry.store.close();
    throw err;
  }
  return entry;
}

const describe = (s) => {
  const sc = s.store.schema;
  if (!sc) return `${fmtInt(s.store.length)} byte records`;
  return `${fmtInt(s.store.length)} × ${sc.kind === 'ragged' ? 'ragged ' : ''}${sc.dtype} ${sc.kind === 'ragged' ? '' : fmtShape(sc.itemShape)}`.trim();
};

/** The streams bar: a chip per stream (extras can be removed) and the add controls. */
export class StreamsBar {
  constructor(root, { onAdd, onRemove, onError }) {
    this.root = root;
    this.list = root.querySelector('#stream-list');
    this.hooks = { onAdd, onRemove, onError };
    this.main = null;
    const form = root.querySelector('#stream-form');
    const url = root.querySelector('#stream-url');
    const input = root.querySelector('#stream-input');
    form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      if (url.value.trim()) this.add(url.value.trim()).then((ok) => { if (ok) url.value = ''; });
    });
    root.querySelector('#stream-dir').addEventListener('click', async () => {
      if (typeof window.showDirectoryPicker !== 'function') return input.click();
      try {
        const handle = await window.showDirectoryPicker({ id: 'loaderx-stream', mode: 'read' });
        await this.add(handle);
      } catch (e) {
        if (e?.name !== 'AbortError') onError(e, 'Adding a stream');
      }
    });
    input.addEventListener('change', () => {
      if (input.files.length) this.add(input.files);
      input.value = '';
    });
  }

  /** Opens and adds a stream; resolves to whether it was added. */
  async add(what) {
    if (!this.main) return false;
    this.root.classList.add('busy');
    try {
      this.hooks.onAdd(await openStream(this.main, what));
      return true;
    } catch (e) {
      this.hooks.onError(e, 'Adding a stream');
      return false;
    } finally {
      this.root.classList.remove('busy');
    }
  }

  render(main, extras) {
    this.main = main;
    const chip = (s, k) => el('li', { class: `chip${k < 0 ? ' main' : ''}`, dataset: { stream: String(k + 1) } },
      el('span', { class: 'dot', style: { background: `var(--s${(k + 1) % 4})` } }),
      el('strong', {}, s.label),
      el('span', { class: 'dim' }, describe(s)),
      k >= 0 ? el('button', { class: 'chip-x', type: 'button', title: 'Remove this stream', 'aria-label': `remove ${s.label}`, onclick: () => this.hooks.onRemove(k) }, '✕') : null);
    this.list.replaceChildren(chip(main, -1), ...extras.map((s, k) => chip(s, k)));
  }
}
